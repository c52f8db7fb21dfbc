-- Access statistics off the memories heap (issue 17). Every search and
-- context call records which memories it returned; written into the
-- memories rows, each write cleared the all-visible bit of a heap page, so
-- the index-only scans of the owner-local search (migration 7) had to visit
-- the heap again for that page until the next VACUUM (measured: 0 heap
-- fetches per search on a vacuumed table, ~540 after searches had written
-- access statistics, and the ceiling query 830 -> 380 per second). Here the
-- statistics live in a narrow table of their own: one row per memory that
-- was ever returned. The columns of memories are no longer written or read.
CREATE TABLE {{.Schema}}.memory_access (
    memory_id        uuid        PRIMARY KEY,
    owner_id         text        NOT NULL,
    access_count     bigint      NOT NULL,
    last_accessed_at timestamptz NOT NULL
);
-- Erase removes an owner's rows.
CREATE INDEX memory_access_owner_idx ON {{.Schema}}.memory_access (owner_id);

INSERT INTO {{.Schema}}.memory_access (memory_id, owner_id, access_count, last_accessed_at)
    SELECT id, owner_id, access_count, last_accessed_at FROM {{.Schema}}.memories
    WHERE last_accessed_at IS NOT NULL;
