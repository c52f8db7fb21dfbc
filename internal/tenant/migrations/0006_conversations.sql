-- Conversation memory: sessions, their append-only message log and a
-- lossless summary DAG over it (docs/conversation.md).
--   sessions:        one row per conversation of an owner; (owner_id, id) is
--                    the key, so another owner's session id is simply not
--                    found. Appends lock this row (FOR UPDATE) and take the
--                    next seq from next_seq, so seq is gap-free per session.
--                    summarized_through/summarized_tokens say how far leaf
--                    summaries cover the log; unsummarized tokens are
--                    token_count - summarized_tokens.
--   messages:        never updated, never deleted by compaction; deleted only
--                    with their session (sessions job, DELETE, erase).
--   summaries:       leaves (depth 0) cover a seq range of messages,
--                    condensed ones (depth >= 1) cover summaries; parent_id is
--                    the condensed summary covering this one (NULL: a root).
--   summary_sources: the ordered children of a summary: a child summary or,
--                    for a leaf, the message range [from_seq, to_seq).
CREATE TABLE {{.Schema}}.sessions (
    owner_id           text        NOT NULL,
    id                 text        NOT NULL,
    agent_id           text        NOT NULL DEFAULT '',
    title              text        NOT NULL DEFAULT '',
    archived           boolean     NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_active_at     timestamptz NOT NULL DEFAULT now(),
    message_count      bigint      NOT NULL DEFAULT 0,
    token_count        bigint      NOT NULL DEFAULT 0,
    next_seq           bigint      NOT NULL DEFAULT 1,
    summarized_through bigint      NOT NULL DEFAULT 0,
    summarized_tokens  bigint      NOT NULL DEFAULT 0,
    summary_count      bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (owner_id, id),
    CONSTRAINT sessions_seq_consistent CHECK (next_seq = message_count + 1 AND summarized_through < next_seq)
);

-- Session list of an owner (most recently active first) and the idle scan of the sessions job.
CREATE INDEX sessions_owner_active_idx ON {{.Schema}}.sessions (owner_id, last_active_at DESC, id);
CREATE INDEX sessions_idle_idx ON {{.Schema}}.sessions (last_active_at);

CREATE TABLE {{.Schema}}.messages (
    owner_id     text        NOT NULL,
    session_id   text        NOT NULL,
    seq          bigint      NOT NULL CHECK (seq >= 1),
    role         text        NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content      text        NOT NULL,
    tool_name    text        NOT NULL DEFAULT '',
    tool_call_id text        NOT NULL DEFAULT '',
    tokens       integer     NOT NULL CHECK (tokens >= 0),
    flags        text[]      NOT NULL DEFAULT '{}',
    embedding    {{.Vector}},
    tsv          tsvector    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, session_id, seq),
    FOREIGN KEY (owner_id, session_id) REFERENCES {{.Schema}}.sessions (owner_id, id) ON DELETE CASCADE,
    CONSTRAINT messages_tool_call CHECK (role <> 'tool' OR tool_call_id <> '')
);

CREATE INDEX messages_tsv_idx ON {{.Schema}}.messages USING gin (tsv);

CREATE TABLE {{.Schema}}.summaries (
    id               uuid        PRIMARY KEY,
    owner_id         text        NOT NULL,
    session_id       text        NOT NULL,
    depth            smallint    NOT NULL CHECK (depth BETWEEN 0 AND 8),
    content          text        NOT NULL,
    expand_hint      text        NOT NULL DEFAULT '',
    earliest_seq     bigint      NOT NULL,
    latest_seq       bigint      NOT NULL,
    earliest_at      timestamptz NOT NULL,
    latest_at        timestamptz NOT NULL,
    tokens           integer     NOT NULL CHECK (tokens >= 0),
    descendant_count integer     NOT NULL CHECK (descendant_count >= 1),
    method           text        NOT NULL CHECK (method IN ('llm', 'llm-aggressive', 'extractive')),
    parent_id        uuid,
    embedding        {{.Vector}},
    tsv              tsvector    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    created_at       timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (owner_id, session_id) REFERENCES {{.Schema}}.sessions (owner_id, id) ON DELETE CASCADE,
    CONSTRAINT summaries_range CHECK (earliest_seq >= 1 AND earliest_seq <= latest_seq)
);

-- Roots and levels of a session's DAG, in seq order.
CREATE INDEX summaries_session_idx ON {{.Schema}}.summaries (owner_id, session_id, depth, earliest_seq);
CREATE INDEX summaries_tsv_idx ON {{.Schema}}.summaries USING gin (tsv);

CREATE TABLE {{.Schema}}.summary_sources (
    summary_id uuid    NOT NULL REFERENCES {{.Schema}}.summaries (id) ON DELETE CASCADE,
    ord        integer NOT NULL,
    child_id   uuid    REFERENCES {{.Schema}}.summaries (id) ON DELETE CASCADE,
    from_seq   bigint,
    to_seq     bigint,
    PRIMARY KEY (summary_id, ord),
    CONSTRAINT summary_sources_one_kind CHECK (
        (child_id IS NOT NULL AND from_seq IS NULL AND to_seq IS NULL)
        OR (child_id IS NULL AND from_seq IS NOT NULL AND to_seq > from_seq))
);

CREATE INDEX summary_sources_child_idx ON {{.Schema}}.summary_sources (child_id) WHERE child_id IS NOT NULL;

-- The roots of a session's DAG (what the summary window and compaction read).
CREATE INDEX summaries_roots_idx ON {{.Schema}}.summaries (owner_id, session_id, earliest_seq) WHERE parent_id IS NULL;
