package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

const defaultBatchSize = 1000

// RunJob runs one maintenance operation: OpDecay, OpExpire, OpPurge or
// OpCompact. Each works in bounded batches (one short statement or
// transaction each), so adds are never blocked for long.
func (s *Store) RunJob(ctx context.Context, op string, opts JobOptions) (*JobResult, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = defaultBatchSize
	}
	run := map[string]func(context.Context, JobOptions, *JobResult) error{
		OpDecay: (*maintenance)(s).decay, OpExpire: (*maintenance)(s).expire, OpPurge: (*maintenance)(s).purge, OpCompact: (*maintenance)(s).compact,
		OpSummarize: s.conv.SummarizeSessions, OpSessions: (*maintenance)(s).sessions,
	}[op]
	if run == nil {
		return nil, core.Invalid("operation", "%q must be one of %s", op, strings.Join(Operations, ", "))
	}
	res := &JobResult{Operation: op, DryRun: opts.DryRun}
	start := time.Now()
	err := run(ctx, opts, res)
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}

// sessions is the sessions operation: idle sessions get their episode
// (long-term memory) before conversation memory archives or deletes them.
func (s *maintenance) sessions(ctx context.Context, opts JobOptions, res *JobResult) error {
	if err := s.lt.IdleEpisodes(ctx, opts); err != nil {
		return err
	}
	return s.conv.ExpireSessions(ctx, opts, res)
}

// expire soft-deletes memories past their expires_at, a batch per
// statement, until none is left (rows locked by a concurrent write are
// skipped and caught by the next run).
func (s *maintenance) expire(ctx context.Context, opts JobOptions, res *JobResult) error {
	if opts.DryRun {
		return s.count(ctx, res, `SELECT count(*) FROM `+s.sql.memories+` WHERE active AND expires_at <= now()`)
	}
	return s.batches(ctx, opts, res, "expiring memories", `WITH e AS (
			SELECT id FROM `+s.sql.memories+` WHERE active AND expires_at <= now()
			ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED),
		u AS (
			UPDATE `+s.sql.memories+` AS m SET active = false, deactivated_at = now()
			FROM e WHERE m.id = e.id RETURNING m.id, m.owner_id, m.content, m.expires_at),
		h AS (
			INSERT INTO `+s.sql.history+` (memory_id, owner_id, action, actor, old_content, details)
			SELECT id, owner_id, 'expire', 'job', content, jsonb_build_object('expiresAt', expires_at) FROM u)
		SELECT count(*) FROM u`)
}

// purge hard-deletes memories that have been inactive for longer than
// retention.purgeInactiveAfter, with their history, a batch per statement.
// It locks only rows that are due (purgeDueSQL), which no add ever locks
// (nearest leaves out rows due soon), so it never blocks an add.
func (s *maintenance) purge(ctx context.Context, opts JobOptions, res *JobResult) error {
	if opts.DryRun {
		return s.count(ctx, res, `SELECT count(*) FROM `+s.sql.memories+` AS m WHERE `+s.purgeDueSQL(0))
	}
	if err := s.batches(ctx, opts, res, "purging memories", s.purgeBatchSQL()); err != nil {
		return err
	}
	return s.purgeEvictions(ctx, opts, res)
}

// purgeEvictions deletes, in batches, the eviction rows of history (the
// one row an evicted memory keeps) older than the retention, so writing
// past the cap does not grow history without bound. They are not counted
// as affected: those are memories. The partial index
// memory_history_evicted_idx (migration history_evictions) finds them.
func (s *maintenance) purgeEvictions(ctx context.Context, opts JobOptions, res *JobResult) error {
	sql := `WITH e AS (
			SELECT h.id FROM ` + s.sql.history + ` AS h
			WHERE h.action = '` + HistoryEvict + `' AND h.created_at < ` + s.keptSinceSQL(0) + `
			ORDER BY h.created_at LIMIT $1),
		d AS (DELETE FROM ` + s.sql.history + ` AS h USING e WHERE h.id = e.id RETURNING 1)
		SELECT count(*) FROM d`
	pace := core.NewPace(opts, res)
	for {
		if err := pace.Next(ctx); err != nil {
			return fmt.Errorf("purging eviction records: %w", err)
		}
		var n int
		if err := s.core.Pool.QueryRow(ctx, sql, opts.BatchSize).Scan(&n); err != nil {
			return core.DBErr("purging eviction records", err)
		}
		pace.Rows(int64(n))
		res.Batches++
		if n < opts.BatchSize {
			return nil
		}
	}
}

// purgeDueSQL is the condition of the rows purge deletes (write.Store.PurgeDueSQL).
func (s *maintenance) purgeDueSQL(margin time.Duration) string { return s.w.PurgeDueSQL(margin) }

// keptSinceSQL is the earliest deactivation time purge keeps (write.Store.KeptSinceSQL).
func (s *maintenance) keptSinceSQL(margin time.Duration) string { return s.w.KeptSinceSQL(margin) }

// purgeBatchSQL deletes one batch of due rows ($1 of them at most) and
// their history, and returns how many.
func (s *maintenance) purgeBatchSQL() string {
	return `WITH p AS (
			SELECT m.id FROM ` + s.sql.memories + ` AS m WHERE ` + s.purgeDueSQL(0) + `
			ORDER BY m.deactivated_at LIMIT $1 FOR UPDATE SKIP LOCKED),
		dh AS (DELETE FROM ` + s.sql.history + ` AS h USING p WHERE h.memory_id = p.id),
		da AS (DELETE FROM ` + s.sql.access + ` AS a USING p WHERE a.memory_id = p.id),
		d AS (DELETE FROM ` + s.sql.memories + ` AS m USING p WHERE m.id = p.id RETURNING 1)
		SELECT count(*) FROM d`
}

// batches runs sql until a batch is short (core.State.Batches).
func (s *maintenance) batches(ctx context.Context, opts JobOptions, res *JobResult, what, sql string) error {
	return s.core.Batches(ctx, opts, res, what, sql)
}

// count fills a dry run's counts from one COUNT query (core.State.Count).
func (s *maintenance) count(ctx context.Context, res *JobResult, sql string) error {
	return s.core.Count(ctx, res, sql)
}
