-- engram:no-transaction
-- Owner-local exact search (issue 17). An owner's rows lie scattered over
-- the heap (memories arrive interleaved across owners), so an exact
-- per-owner scan read ~1,000 heap pages for 1,000 memories. This index holds
-- every non-superseded row's vector and the columns the search and dedup
-- filters need, grouped by owner: the exact top-K is read by an index-only
-- scan (~1 index page per 4 rows, no heap while the visibility map is
-- current), then only the K winners are fetched from the heap by primary
-- key. Recall stays 1.0: every row of the owner is still compared. The
-- second key, md5(content), finds add's identical-text neighbour without
-- reading the owner's heap rows.
--
-- A btree tuple holds at most 2,704 bytes, so the vector fits up to
-- {{.OwnerVectorsMaxDims}} dimensions with the longest owner id (256 bytes);
-- larger tenants keep the owner index path (no index is created here).
-- Built CONCURRENTLY: adds keep running while a large tenant is indexed.
{{- if .OwnerVectors}}
CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_owner_vectors_idx ON {{.Schema}}.memories (owner_id, md5(content))
    INCLUDE (embedding, id, active, expires_at, deactivated_at) WHERE superseded_by IS NULL;
{{- end}}
