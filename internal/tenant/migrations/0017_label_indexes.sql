-- engram:no-transaction
-- GIN indexes for the metadata and tags filters of search and list
-- (issue 31, docs/api.md "Filters"): a metadata condition is jsonb
-- containment (metadata @> '{"key": value}') or a key test (metadata ? key),
-- both served by the default jsonb_ops; a tags condition is array
-- containment or overlap (tags @> / &&). A selective filter lets the
-- planner combine one of these with the owner's index (a BitmapAnd)
-- instead of reading every row of the owner. Partial on active rows, as
-- search and the default list read; built CONCURRENTLY so adds go on
-- while it builds (on Citus too, which builds it on the tenant's worker).
CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_metadata_idx ON {{.Schema}}.memories USING gin (metadata) WHERE active;
CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_tags_idx ON {{.Schema}}.memories USING gin (tags) WHERE active;
