-- Where compaction stands for each owner. A compaction run has a time budget
-- per owner; when it runs out, the pass stops after a batch and the next run
-- resumes at the cursor. A complete pass records the time through which every
-- two active memories of the owner have been compared, so the next pass only
-- compares pairs with a memory written after it.
--   pass_started_at:  the pass in progress began then (NULL: none in progress)
--   cursor_*:         the last memory that pass looked at, in compaction order
--                     (importance DESC, updated_at DESC, id)
--   compared_through: memories written before it were compared with each
--                     other by a complete pass (NULL: never)
--   threshold:        the similarity threshold of the pass in progress or
--                     of the last complete one (another voids the state)
CREATE TABLE {{.Schema}}.compaction_state (
    owner_id          text PRIMARY KEY,
    pass_started_at   timestamptz,
    cursor_importance smallint,
    cursor_updated_at timestamptz,
    cursor_id         uuid,
    compared_through  timestamptz,
    threshold         float8
);
