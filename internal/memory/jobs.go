package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
		OpDecay: s.decay, OpExpire: s.expire, OpPurge: s.purge, OpCompact: s.compact,
	}[op]
	if run == nil {
		return nil, invalid("operation", "%q must be one of decay, expire, purge, compact", op)
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

// decay forgets (soft-deletes) active memories whose decay score is below
// forgetting.minDecayScore. It walks the table in primary-key order, one
// batch per statement, so every row is looked at once (no rescans).
func (s *Store) decay(ctx context.Context, opts JobOptions, res *JobResult) error {
	min := s.policy.Forgetting.MinDecayScore
	if min <= 0 {
		return nil
	}
	after := "00000000-0000-0000-0000-000000000000"
	change := `u AS (
			UPDATE ` + s.sql.memories + ` AS m SET active = false, deactivated_at = now()
			FROM f WHERE m.id = f.id AND m.active RETURNING m.id, m.owner_id, m.content),
		h AS (
			INSERT INTO ` + s.sql.history + ` (memory_id, owner_id, action, actor, old_content, details)
			SELECT id, owner_id, 'forget', 'job', content, jsonb_build_object('minDecayScore', $3::float8) FROM u),`
	count := `(SELECT count(*) FROM u)`
	if opts.DryRun {
		change, count = "", `(SELECT count(*) FROM f)`
	}
	sql := `WITH b AS (
			SELECT m.id, ` + decayExpr("$4", "$5") + ` AS d FROM ` + s.sql.memories + ` AS m
			WHERE m.active AND m.id > $1::uuid ORDER BY m.id LIMIT $2),
		f AS (SELECT id FROM b WHERE d < $3::float8),
		` + change + `
		last AS (SELECT id FROM b ORDER BY id DESC LIMIT 1)
		SELECT (SELECT id::text FROM last), (SELECT count(*) FROM b), ` + count
	for {
		var last *string
		var scanned, affected int64
		err := s.pool.QueryRow(ctx, sql, after, opts.BatchSize, min, s.decayNames, s.decaySeconds).Scan(&last, &scanned, &affected)
		if err != nil {
			return s.dbErr("forgetting decayed memories", err)
		}
		res.Batches++
		res.Scanned += scanned
		res.Affected += affected
		if last == nil || scanned < int64(opts.BatchSize) {
			return nil
		}
		after = *last
	}
}

// expire soft-deletes memories past their expires_at, a batch per
// statement, until none is left (rows locked by a concurrent write are
// skipped and caught by the next run).
func (s *Store) expire(ctx context.Context, opts JobOptions, res *JobResult) error {
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
func (s *Store) purge(ctx context.Context, opts JobOptions, res *JobResult) error {
	retention := time.Duration(s.policy.Retention.PurgeInactiveAfter).Seconds()
	due := `NOT active AND deactivated_at < now() - make_interval(secs => ` + fmt.Sprintf("%f", retention) + `)`
	if opts.DryRun {
		return s.count(ctx, res, `SELECT count(*) FROM `+s.sql.memories+` WHERE `+due)
	}
	return s.batches(ctx, opts, res, "purging memories", `WITH p AS (
			SELECT id FROM `+s.sql.memories+` WHERE `+due+`
			ORDER BY deactivated_at LIMIT $1 FOR UPDATE SKIP LOCKED),
		dh AS (DELETE FROM `+s.sql.history+` AS h USING p WHERE h.memory_id = p.id),
		d AS (DELETE FROM `+s.sql.memories+` AS m USING p WHERE m.id = p.id RETURNING 1)
		SELECT count(*) FROM d`)
}

// batches runs sql (one parameter: the batch size, returning the rows
// changed) until a batch changes fewer rows than the batch size.
func (s *Store) batches(ctx context.Context, opts JobOptions, res *JobResult, what, sql string) error {
	for {
		var n int64
		if err := s.pool.QueryRow(ctx, sql, opts.BatchSize).Scan(&n); err != nil {
			return s.dbErr(what, err)
		}
		res.Batches++
		res.Scanned += n
		res.Affected += n
		if n < int64(opts.BatchSize) {
			return nil
		}
	}
}

// count fills a dry run's counts from one COUNT query.
func (s *Store) count(ctx context.Context, res *JobResult, sql string) error {
	var n int64
	if err := s.pool.QueryRow(ctx, sql).Scan(&n); err != nil {
		return s.dbErr("counting", err)
	}
	res.Batches, res.Scanned, res.Affected = 1, n, n
	return nil
}

// compact merges clusters of near-duplicate active memories (similarity >=
// dedup.autoMergeThreshold, same category) of each owner: the best memory of
// a cluster is kept, the others are superseded by it. Each owner is one
// short transaction under the owner's lock. Afterwards the tables are
// vacuumed and analyzed to reclaim space (needs PostgreSQL 17's MAINTAIN
// privilege, which provisioning grants; older servers skip it with a warning).
func (s *Store) compact(ctx context.Context, opts JobOptions, res *JobResult) error {
	after := ""
	for {
		rows, err := s.pool.Query(ctx, `SELECT owner_id FROM `+s.sql.memories+`
			WHERE active AND owner_id > $1 GROUP BY owner_id HAVING count(*) > 1 ORDER BY owner_id LIMIT $2`, after, opts.BatchSize)
		if err != nil {
			return s.dbErr("listing owners to compact", err)
		}
		owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return s.dbErr("listing owners to compact", err)
		}
		for _, owner := range owners {
			if err := s.compactOwner(ctx, owner, opts.DryRun, res); err != nil {
				return err
			}
		}
		res.Batches++
		if len(owners) < opts.BatchSize {
			break
		}
		after = owners[len(owners)-1]
	}
	if opts.DryRun {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) `+s.sql.memories+`, `+s.sql.history, pgx.QueryExecModeSimpleProtocol); err != nil {
		return s.dbErr("vacuuming after compaction", err)
	}
	return nil
}

func (s *Store) compactOwner(ctx context.Context, owner string, dryRun bool, res *JobResult) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockOwner(ctx, tx, owner); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id::text, category, importance, access_count, updated_at, embedding::real[]
			FROM `+s.sql.memories+` WHERE owner_id = $1 AND active`, owner)
		if err != nil {
			return s.dbErr("loading memories to compact", err)
		}
		mems, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (compactRow, error) {
			var c compactRow
			err := r.Scan(&c.id, &c.category, &c.importance, &c.accessCount, &c.updatedAt, &c.vec)
			return c, err
		})
		if err != nil {
			return s.dbErr("loading memories to compact", err)
		}
		res.Scanned += int64(len(mems))
		groups := clusters(mems, s.policy.Dedup.AutoMergeThreshold)
		for _, g := range groups {
			res.Affected += int64(len(g.losers))
			if !dryRun {
				if err := s.applyCluster(ctx, tx, g); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// applyCluster supersedes the losers of a cluster by its keeper; the
// keeper's scope widens to owner level when the cluster spans agents or sessions.
func (s *Store) applyCluster(ctx context.Context, tx pgx.Tx, g cluster) error {
	_, err := tx.Exec(ctx, `WITH upd AS (
			UPDATE `+s.sql.memories+` AS m SET active = false, superseded_by = $1, deactivated_at = now()
			WHERE m.id = ANY($2::uuid[]) RETURNING m.id, m.owner_id, m.content, m.agent_id, m.session_id),
		h AS (
			INSERT INTO `+s.sql.history+` (memory_id, owner_id, action, actor, old_content, details)
			SELECT id, owner_id, 'compact', 'job', content, jsonb_build_object('supersededBy', $1::text) FROM upd)
		UPDATE `+s.sql.memories+` AS k SET
			agent_id = CASE WHEN EXISTS (SELECT 1 FROM upd WHERE upd.agent_id <> k.agent_id) THEN '' ELSE k.agent_id END,
			session_id = CASE WHEN EXISTS (SELECT 1 FROM upd WHERE upd.session_id <> k.session_id) THEN '' ELSE k.session_id END
		WHERE k.id = $1`, g.keeper, g.losers)
	if err != nil {
		return s.dbErr("superseding duplicates of "+g.keeper, err)
	}
	return nil
}
