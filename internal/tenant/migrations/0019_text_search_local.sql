-- A stored vector of each memory, message, summary and episode under the
-- tenant's text search configuration when it is not English (issue 26,
-- 22nd review, NEW 2).
-- Before, every search under another configuration computed
-- to_tsvector(config, content) of every matching row to filter and rank
-- it: 1,000 memories of 64 KiB cost 21.9 s of CPU per search in German,
-- 27 ms in English, whose vectors the generated tsv column stores.
--
-- tsv_local holds to_tsvector(tsv_config, content) (summary for
-- episodes); tsv_config names the
-- configuration it was computed with (NULL: none, the tenant is English).
-- The service writes both on every insert and rewrite of content with the
-- configuration text_search names (next while a switch is under way, else
-- config); the operator backfills the rows of another configuration in
-- bounded batches before it switches (internal/tenant/textsearch_local.go).
-- A row whose tsv_config is not the searched configuration (written by a
-- service that read the previous one) is still matched right: the index
-- and the queries compute its vector from content (tenant.TextVector).
--
-- Columns without a default: catalog changes only (no table rewrite), on
-- plain PostgreSQL and on Citus, which propagates the ALTER to the worker
-- holding the tenant's schema.
ALTER TABLE {{.Schema}}.memories
    ADD COLUMN tsv_config text,
    ADD COLUMN tsv_local tsvector;

-- History search and episode ranking read an owner's rows by owner (no
-- text index): they read the stored vector too, and parse a row's first
-- 2,048 characters only when it holds another configuration's.
ALTER TABLE {{.Schema}}.messages
    ADD COLUMN tsv_config text,
    ADD COLUMN tsv_local tsvector;

ALTER TABLE {{.Schema}}.summaries
    ADD COLUMN tsv_config text,
    ADD COLUMN tsv_local tsvector;

ALTER TABLE {{.Schema}}.episodes
    ADD COLUMN tsv_config text,
    ADD COLUMN tsv_local tsvector;

-- The configuration a switch is filling tsv_local with before it becomes
-- config (NULL: none under way).
ALTER TABLE {{.Schema}}.text_search ADD COLUMN next text;
