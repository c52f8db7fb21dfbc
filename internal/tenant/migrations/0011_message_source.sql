-- The source of every conversation message (docs/conversation.md): who
-- appended it, capped by the credential exactly like a memory write (an
-- agent token appends as agent even when it relays the user's words as role
-- user). Extraction from a session writes its facts with the least trusted
-- source among the request's and the messages' it reads, so an agent cannot
-- launder its own text into user-sourced memories (docs/long-term.md).
--
-- Messages stored before this migration get 'agent': who appended them was
-- checked but not kept, so the conservative answer is the least trusted
-- source a caller can assert.
--
-- The constant default makes ADD COLUMN a catalog change (no table
-- rewrite). The CHECK is added NOT VALID: every existing row holds the
-- default, which passes it, so validating would only scan the whole log
-- under this migration's ACCESS EXCLUSIVE lock while appends wait (measured
-- on 400,000 messages, 174 MB, in cache: 59 ms validated, 0.2 ms NOT VALID;
-- a large log with inline embeddings read from disk takes far longer).
-- Rows written from now on are checked all the same.
ALTER TABLE {{.Schema}}.messages ADD COLUMN source text NOT NULL DEFAULT 'agent';
ALTER TABLE {{.Schema}}.messages ADD CONSTRAINT messages_source
    CHECK (source IN ('user', 'agent', 'system', 'job')) NOT VALID;
