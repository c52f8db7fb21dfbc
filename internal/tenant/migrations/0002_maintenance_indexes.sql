-- Indexes for the maintenance jobs, so expire and purge touch only the rows
-- they change instead of scanning the table in every batch.
CREATE INDEX memories_expiry_idx ON {{.Schema}}.memories (expires_at)
    WHERE active AND expires_at IS NOT NULL;

CREATE INDEX memories_inactive_idx ON {{.Schema}}.memories (deactivated_at)
    WHERE NOT active;

-- The superseded_by foreign key is checked on every hard delete (purge, erase).
CREATE INDEX memories_superseded_by_idx ON {{.Schema}}.memories (superseded_by)
    WHERE superseded_by IS NOT NULL;
