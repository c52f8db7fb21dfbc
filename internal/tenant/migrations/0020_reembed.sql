-- The state of a re-embed of the tenant's vectors with another embedder
-- (issue 29; docs/decisions.md, "Re-embedding on a model change"). One
-- row, like text_search: the embedder every stored vector was made with
-- (provider and model are empty until the first re-embed records them;
-- dimensions is the vector size of the embedding columns then), and, while
-- a re-embed is under way (phase 'filling'), the embedder the shadow
-- columns embedding_next are filled with. The shadow columns themselves are
-- added by the re-embed (internal/memory/reembed: Begin), with the new
-- embedder's own dimensions, and are gone after its switch or abort.
CREATE TABLE {{.Schema}}.reembed (
    id              boolean     PRIMARY KEY DEFAULT true CHECK (id),
    provider        text        NOT NULL DEFAULT '',
    model           text        NOT NULL DEFAULT '',
    dimensions      integer,
    next_provider   text,
    next_model      text,
    next_dimensions integer,
    phase           text        NOT NULL DEFAULT 'idle' CHECK (phase IN ('idle', 'filling')),
    filled          bigint      NOT NULL DEFAULT 0 CHECK (filled >= 0),
    started_at      timestamptz,
    switched_at     timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reembed_next CHECK ((phase = 'filling') = (next_dimensions IS NOT NULL))
);

INSERT INTO {{.Schema}}.reembed DEFAULT VALUES;

-- While a re-embed fills, a row whose text a writer changes without giving
-- its new vector too loses the new vector it had: the fill gives it one
-- for the new text, and the switch waits for it. Begin puts this on the
-- tables whose text the service rewrites (memories, summaries); Switch and
-- Abort take it off.
CREATE FUNCTION {{.Schema}}.reembed_text_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    NEW.embedding_next := NULL;
    RETURN NEW;
END
$$;
