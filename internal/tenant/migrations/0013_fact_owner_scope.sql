-- engram:no-transaction
-- Facts extracted from a conversation session belong to the owner, not to
-- the session (docs/long-term.md). Session extraction stored them with the
-- session's id, so a search or context call naming another session of the
-- same owner could not see what the user had said before. They now get
-- owner scope (session_id '') and keep the session as provenance in
-- source_session; the policy's conversation.extractionScope: session keeps
-- new ones session-scoped for whoever wants that.
--
-- No transaction: the column is a catalog change (constant default, no
-- rewrite), and the move below then takes row locks only, so the service
-- keeps reading and writing while it runs. Both statements can run again
-- after an interruption: the column IF NOT EXISTS, and a moved row no
-- longer matches the move's condition.
ALTER TABLE {{.Schema}}.memories ADD COLUMN IF NOT EXISTS source_session text NOT NULL DEFAULT '';

-- The extracted facts of earlier releases are the rows whose session_id
-- names a conversation session of the same owner that has been extracted
-- from (extracted_through > 0), with that session's agent, created at or
-- after the session: exactly what ExtractSession wrote (agent and session
-- of the session). A memory an application added itself with that
-- session's id and agent matches too and becomes owner-wide: it stays the
-- same owner's, only visible to the owner's other sessions. Each move is
-- recorded in the memory's history (actor system).
WITH moved AS (
    UPDATE {{.Schema}}.memories AS m
       SET source_session = m.session_id, session_id = ''
      FROM {{.Schema}}.sessions AS c
     WHERE c.owner_id = m.owner_id AND c.id = m.session_id AND m.session_id <> ''
       AND c.extracted_through > 0 AND m.agent_id = c.agent_id AND m.created_at >= c.created_at
    RETURNING m.id, m.owner_id, m.source_session)
INSERT INTO {{.Schema}}.memory_history (memory_id, owner_id, action, actor, details)
SELECT id, owner_id, 'rescope', 'system',
       jsonb_build_object('sourceSession', source_session, 'reason', 'extracted facts belong to the owner (migration 13)')
  FROM moved;
