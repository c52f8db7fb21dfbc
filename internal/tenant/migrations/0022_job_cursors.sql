-- Where a maintenance walk stopped, so the next run goes on from there
-- instead of from the lowest id (issue 32). Decay walks the memories in
-- id order; a run paced to a low duty or a small rows/s budget, or cut by
-- its deadline, covered only the low ids and the next run began there
-- again, so the high ids were never looked at. With the cursor each run
-- starts where the last one stopped, goes to the end and wraps around to
-- its own start: over runs every row is looked at. The login role writes
-- the row (a tenant that rewrites it only moves where its own decay
-- starts; every row is still reached within one full walk).
CREATE TABLE {{.Schema}}.job_cursors (
    operation  text        PRIMARY KEY CHECK (operation IN ('decay')),
    after_id   uuid        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
