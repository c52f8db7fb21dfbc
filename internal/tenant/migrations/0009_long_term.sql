-- Long-term memory from conversations (docs/memory-model.md).
--   sessions:  extracted_through is the extraction watermark (the highest
--              seq whose facts were extracted); ended_at is set by
--              EndSession; profile_version/constraints_version are the
--              session's snapshot of its agent's documents (0 = none).
--   episodes:  one per session of >= 3 user turns, written when it ends or
--              goes idle; no foreign key to sessions, since an episode
--              outlives its session (the sessions job deletes idle ones).
--   documents: the current profile / constraints of (owner, agent).
--   document_changes: every write of a document (before/after, source);
--              the after text of version v is that version's content.
ALTER TABLE {{.Schema}}.sessions
    ADD COLUMN extracted_through   bigint NOT NULL DEFAULT 0,
    ADD COLUMN ended_at            timestamptz,
    ADD COLUMN profile_version     bigint NOT NULL DEFAULT 0,
    ADD COLUMN constraints_version bigint NOT NULL DEFAULT 0;

CREATE TABLE {{.Schema}}.episodes (
    id         uuid        PRIMARY KEY,
    owner_id   text        NOT NULL,
    session_id text        NOT NULL,
    agent_id   text        NOT NULL DEFAULT '',
    summary    text        NOT NULL,
    method     text        NOT NULL CHECK (method IN ('llm', 'llm-aggressive', 'extractive')),
    user_turns integer     NOT NULL CHECK (user_turns >= 0),
    started_at timestamptz NOT NULL,
    ended_at   timestamptz NOT NULL,
    embedding  {{.Vector}},
    tsv        tsvector    GENERATED ALWAYS AS (to_tsvector('english', summary)) STORED,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_id, session_id)
);

CREATE INDEX episodes_owner_idx ON {{.Schema}}.episodes (owner_id, ended_at DESC);
CREATE INDEX episodes_tsv_idx ON {{.Schema}}.episodes USING gin (tsv);

CREATE TABLE {{.Schema}}.documents (
    owner_id   text        NOT NULL,
    agent_id   text        NOT NULL DEFAULT '',
    kind       text        NOT NULL CHECK (kind IN ('profile', 'constraints')),
    version    bigint      NOT NULL CHECK (version >= 1),
    content    text        NOT NULL,
    source     text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, agent_id, kind)
);

CREATE TABLE {{.Schema}}.document_changes (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner_id   text        NOT NULL,
    agent_id   text        NOT NULL DEFAULT '',
    kind       text        NOT NULL,
    version    bigint      NOT NULL,
    source     text        NOT NULL,
    actor_id   text        NOT NULL DEFAULT '',
    before     text        NOT NULL,
    after      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_id, agent_id, kind, version)
);

CREATE INDEX document_changes_owner_idx ON {{.Schema}}.document_changes (owner_id, id DESC);
