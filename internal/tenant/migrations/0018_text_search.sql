-- The tenant's text search configuration (issue 31): the one the text
-- index of memories is built with, which every search uses to match it.
-- The operator changes it only after the index of the new configuration is
-- built (internal/tenant/textsearch.go), so searches always run on a valid
-- index; the service reads it (internal/memory/core/textsearch.go). One
-- row; 'english' is what the generated tsv columns have always held.
CREATE TABLE {{.Schema}}.text_search (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    config      text        NOT NULL DEFAULT 'english',
    switched_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO {{.Schema}}.text_search DEFAULT VALUES;
