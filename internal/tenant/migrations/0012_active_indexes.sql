-- engram:no-transaction
-- The owner-local indexes hold active rows only (issue 17, jobs table).
--
-- Deactivating a row (decay, expire, forget, supersede) is never a HOT
-- update (`active` is a key of the owner index), so the new, inactive row
-- version gets an entry in every index whose predicate it satisfies. The
-- covering index of migration 7 (WHERE superseded_by IS NULL) took a
-- 1.6 kB tuple and the text index of migration 10 one GIN entry per word
-- for every deactivated row: decay and expire of 50,000 rows of 1,000,000
-- ran 3-4x slower than before them. Both are rebuilt here with the
-- predicate `active AND superseded_by IS NULL`, so a deactivated version
-- skips them; what deactivation inserts is back to what it was before.
--
-- The covering index: search and context read active rows only. Add's
-- neighbour lookup also compares inactive rows that the purge will not
-- delete soon; those are few and are read through memories_inactive_owner_idx
-- (a small tuple: owner and deactivation time) and the heap. Its predicate
-- names deactivated_at, not `NOT active` (equivalent: deactivation sets the
-- time, reactivation clears it), so the lookup's query implies it but not
-- the predicate of the purge's index on deactivation time: the planner
-- cannot read that tenant-wide index for one owner's lookup, which it did
-- with statistics from before a burst of deactivations (1.3 s per add).
--
-- The text index: a partial GIN index over tsv alone was tried (see
-- docs/performance.md): the planner stopped combining it with the owner
-- index and read every tenant-wide match of a query's words from the heap.
-- This one indexes the owner too, as one more lexeme per row that no text
-- can produce (it holds a space): a search ANDs that lexeme into its query,
-- so the index alone returns the owner's matching rows, whatever the
-- planner estimates. Queries still test `tsv @@ query`, so the result is
-- exactly the rows whose text matches.
--
-- Tenants with vectors too large for a btree tuple (no .OwnerVectors) get
-- the text index only: their one-scan lookup reads the owner index.
--
-- Built CONCURRENTLY before the indexes they replace are dropped: searches
-- and adds keep running throughout (pods of the previous release answer
-- correctly but read the owner's table rows until they are replaced).
{{- if .OwnerVectors}}
CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_active_vectors_idx ON {{.Schema}}.memories (owner_id, md5(content))
    INCLUDE (embedding, id, expires_at) WHERE active AND superseded_by IS NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_inactive_owner_idx ON {{.Schema}}.memories (owner_id, deactivated_at)
    WHERE deactivated_at IS NOT NULL AND superseded_by IS NULL;
{{- end}}
CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_owner_text_idx ON {{.Schema}}.memories
    USING gin ((tsv || array_to_tsvector(ARRAY['owner ' || md5(owner_id)]))) WITH (fastupdate = off)
    WHERE active AND superseded_by IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS {{.Schema}}.memories_owner_vectors_idx;
DROP INDEX CONCURRENTLY IF EXISTS {{.Schema}}.memories_tsv_idx;
