-- engram:no-transaction
-- A memory evicted over the per-owner cap keeps one history row, action
-- 'evict' (no content), so a client holding its id can tell an eviction
-- from a loss (issue 26). The purge job deletes those rows once they are
-- older than retention.purgeInactiveAfter; this partial index finds them
-- without reading the whole history, and costs other history inserts
-- nothing but the predicate check.
CREATE INDEX CONCURRENTLY IF NOT EXISTS memory_history_evicted_idx ON {{.Schema}}.memory_history (created_at)
    WHERE action = 'evict';
