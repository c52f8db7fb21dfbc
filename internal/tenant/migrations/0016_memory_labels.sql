-- Metadata and tags of a memory (issue 31, docs/api.md "Metadata and
-- tags"): metadata is a JSON object, tags a small set of strings, both set
-- by the client on add and changed by update. The service bounds them
-- (internal/memory/core/labels.go) before they reach a statement, always
-- as parameters.
--
-- The constant defaults make both ADD COLUMNs catalog changes (no table
-- rewrite, the ACCESS EXCLUSIVE lock held for milliseconds), on plain
-- PostgreSQL and on Citus, which propagates the ALTER to the worker
-- holding the tenant's schema. Rows written before read as no metadata
-- ({}) and no tags ({}).
ALTER TABLE {{.Schema}}.memories
    ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN tags text[] NOT NULL DEFAULT '{}'::text[];
