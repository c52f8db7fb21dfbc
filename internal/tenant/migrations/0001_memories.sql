-- Memories and their history. Vector search is exact per owner: the owner
-- index bounds every scan to one owner's rows (at most limits.maxMemoriesPerOwner),
-- so top-K is always the owner's true top-K. A shared HNSW index with an owner
-- filter returns too few rows for small owners and slows every insert; there is none.
CREATE TABLE {{.Schema}}.memories (
    id               uuid PRIMARY KEY,
    owner_id         text        NOT NULL,
    agent_id         text        NOT NULL DEFAULT '',
    session_id       text        NOT NULL DEFAULT '',
    source           text        NOT NULL CHECK (source IN ('user', 'agent', 'system', 'job')),
    category         text        NOT NULL,
    content          text        NOT NULL,
    importance       smallint    NOT NULL DEFAULT 5 CHECK (importance BETWEEN 1 AND 10),
    embedding        {{.Vector}} NOT NULL,
    tsv              tsvector    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    flags            text[]      NOT NULL DEFAULT '{}',
    active           boolean     NOT NULL DEFAULT true,
    superseded_by    uuid        REFERENCES {{.Schema}}.memories (id) ON DELETE SET NULL,
    expires_at       timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    last_accessed_at timestamptz,
    access_count     bigint      NOT NULL DEFAULT 0,
    deactivated_at   timestamptz,
    CONSTRAINT memories_not_self_superseded CHECK (superseded_by IS NULL OR superseded_by <> id),
    CONSTRAINT memories_inactive_since CHECK (active OR deactivated_at IS NOT NULL)
) WITH (fillfactor = 90); -- room for HOT updates of access stats

-- Owner scans: search (owner, active), dedup (owner), list (owner, active, newest first).
CREATE INDEX memories_owner_idx ON {{.Schema}}.memories (owner_id, active, created_at DESC, id);

CREATE TABLE {{.Schema}}.memory_history (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id   uuid        NOT NULL,
    owner_id    text        NOT NULL,
    action      text        NOT NULL,
    actor       text        NOT NULL CHECK (actor IN ('user', 'agent', 'system', 'job')),
    old_content text,
    new_content text,
    details     jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX memory_history_memory_idx ON {{.Schema}}.memory_history (memory_id, id);
CREATE INDEX memory_history_owner_idx ON {{.Schema}}.memory_history (owner_id);
