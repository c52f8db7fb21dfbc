package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// DefaultCompactOwnerBudget is how long one compaction run works on one
// owner before it moves on (JobOptions.OwnerBudget); the owner's pass
// continues in the next run.
const DefaultCompactOwnerBudget = 10 * time.Second

// compact merges clusters of near-duplicate active memories (similarity >=
// dedup.autoMergeThreshold, same category) of each owner: the first memory
// of a cluster in compaction order is kept, the others are superseded by it.
//
// An owner's memories are read without a lock and compared in memory; only
// the changes of one batch (at most BatchSize memories looked at or
// superseded) are written under the owner's lock, in a short transaction,
// so a write of that owner waits at most for one batch. A run spends at most
// OwnerBudget on an owner, then saves its cursor; the next run resumes there
// (compaction_state). A complete pass records a watermark, and the next pass
// only compares pairs with a memory written after it.
//
// Afterwards the tables are vacuumed and analyzed to reclaim space (needs
// PostgreSQL 17's MAINTAIN privilege, which provisioning grants).
func (s *maintenance) compact(ctx context.Context, opts JobOptions, res *JobResult) error {
	if opts.OwnerBudget <= 0 {
		opts.OwnerBudget = DefaultCompactOwnerBudget
	}
	after := ""
	pace := core.NewPace(opts, res)
	for {
		owners, err := s.ownersToCompact(ctx, after, opts.BatchSize)
		if err != nil {
			return err
		}
		for _, owner := range owners {
			if err := s.compactOwner(ctx, owner, opts, pace, res); err != nil {
				return err
			}
		}
		if len(owners) < opts.BatchSize {
			break
		}
		after = owners[len(owners)-1]
	}
	if opts.DryRun {
		return nil
	}
	if _, err := s.core.Pool.Exec(ctx, `VACUUM (ANALYZE) `+s.sql.memories+`, `+s.sql.history, pgx.QueryExecModeSimpleProtocol); err != nil {
		return core.DBErr("vacuuming after compaction", err)
	}
	return nil
}

// ownersToCompact lists, in order after after, the owners with two or more
// active memories and work left: a pass in progress, no complete pass yet
// (or one for another threshold), or a memory written since the last one.
func (s *maintenance) ownersToCompact(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := s.core.Pool.Query(ctx, `SELECT m.owner_id FROM `+s.sql.memories+` AS m
		LEFT JOIN `+s.sql.compactState+` AS c ON c.owner_id = m.owner_id
		WHERE m.active AND m.owner_id > $1
		GROUP BY m.owner_id, c.pass_started_at, c.compared_through, c.threshold
		HAVING count(*) > 1 AND (c.pass_started_at IS NOT NULL OR c.compared_through IS NULL
			OR c.threshold IS DISTINCT FROM $3 OR max(m.updated_at) > c.compared_through)
		ORDER BY m.owner_id LIMIT $2`, after, limit, s.core.Policy.Dedup.AutoMergeThreshold)
	if err != nil {
		return nil, core.DBErr("listing owners to compact", err)
	}
	owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, core.DBErr("listing owners to compact", err)
	}
	return owners, nil
}

// compactOwner continues (or starts) the owner's pass for at most
// opts.OwnerBudget of work (pace's pauses not counted), one batch at a
// time, the owner's read and each batch spaced by pace.
func (s *maintenance) compactOwner(ctx context.Context, owner string, opts JobOptions, pace *core.Pace, res *JobResult) error {
	if err := pace.Next(ctx); err != nil {
		return fmt.Errorf("compacting owner %s: %w", owner, err)
	}
	start, paused := time.Now(), res.Paused
	st, err := s.loadCompactState(ctx, owner)
	if err != nil {
		return err
	}
	threshold := s.core.Policy.Dedup.AutoMergeThreshold
	if st.threshold == nil || *st.threshold != threshold {
		// Compared for another threshold (or never): every memory is new
		// and a pass in progress starts over.
		st = compactState{}
	}
	rows, now, err := s.loadCompactRows(ctx, owner, st.cursor, st.comparedThrough)
	if err != nil {
		return err
	}
	res.Scanned += int64(len(rows))
	pace.Rows(int64(len(rows)))
	if st.passStartedAt == nil {
		st.passStartedAt, st.cursor, st.threshold = &now, nil, &threshold
	}
	c := newCompactor(rows, threshold)
	for first := true; ; first = false {
		if !first {
			if err := pace.Next(ctx); err != nil {
				return fmt.Errorf("compacting owner %s: %w", owner, err)
			}
		}
		found, last, done := c.step(opts.BatchSize, opts.BatchSize)
		res.Batches++
		for _, g := range found {
			res.Affected += int64(len(g.losers))
		}
		if last != nil {
			st.cursor = &compactCursor{importance: last.importance, updatedAt: last.updatedAt, id: last.id}
		}
		if done {
			// Every pair of memories written before the pass (less the
			// margin) has now been compared.
			through := st.passStartedAt.Add(-compactFreshMargin)
			st = compactState{comparedThrough: &through, threshold: &threshold}
		}
		stop := done || time.Since(start)-(res.Paused-paused) >= opts.OwnerBudget || ctx.Err() != nil
		if !opts.DryRun && (len(found) > 0 || stop) {
			if err := s.applyCompactBatch(ctx, owner, found, st); err != nil {
				return err
			}
		}
		if s.afterCompactBatch != nil {
			s.afterCompactBatch(owner)
		}
		if stop {
			if !done {
				res.Pending++
			}
			return ctx.Err()
		}
	}
}

// loadCompactRows reads the owner's active memories after the cursor (all
// of them without one), marking as fresh those written after comparedBefore,
// and the database's time of the read.
func (s *maintenance) loadCompactRows(ctx context.Context, owner string, cur *compactCursor, comparedBefore *time.Time) ([]compactRow, time.Time, error) {
	a := &core.Args{}
	where := `owner_id = ` + a.Add(owner) + ` AND active`
	if cur != nil {
		// After the cursor in compaction order (compactBefore).
		imp, at, id := a.Add(cur.importance)+`::smallint`, a.Add(cur.updatedAt)+`::timestamptz`, a.Add(cur.id)+`::uuid`
		where += ` AND (importance < ` + imp + ` OR importance = ` + imp + ` AND (updated_at < ` + at + ` OR updated_at = ` + at + ` AND id > ` + id + `))`
	}
	// The vector as pgvector's own binary form (pgv.Vector), not cast to
	// real[]: the server sends it without a per-element conversion and the
	// client decodes it in one loop, where real[] went through the array
	// codec per element; reading the owners of the 200,000-memory bench
	// tenant took 8.3 s as real[] and 2.4 s so (the same float32 values).
	// Cast to vector without a size: a re-embed's switch changes the
	// column's type to another vector(N), and a cached statement whose
	// result type changed fails ("cached plan must not change result
	// type"; review 18).
	rows, err := s.core.Pool.Query(ctx, `SELECT id::text, category, importance, updated_at, embedding::vector, statement_timestamp()
		FROM `+s.sql.memories+` WHERE `+where, a.List...)
	if err != nil {
		return nil, time.Time{}, core.DBErr("loading memories to compact", err)
	}
	var now time.Time
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (compactRow, error) {
		var c compactRow
		var vec pgv.Vector
		err := r.Scan(&c.id, &c.category, &c.importance, &c.updatedAt, &vec, &now)
		c.vec = vec.Slice()
		c.fresh = comparedBefore == nil || c.updatedAt.After(*comparedBefore)
		return c, err
	})
	if err != nil {
		return nil, time.Time{}, core.DBErr("loading memories to compact", err)
	}
	if now.IsZero() {
		if err := s.core.Pool.QueryRow(ctx, `SELECT statement_timestamp()`).Scan(&now); err != nil {
			return nil, time.Time{}, core.DBErr("reading the time", err)
		}
	}
	return out, now, nil
}

// applyCompactBatch supersedes the losers of a batch's clusters by their
// keepers and saves the owner's state, in one transaction under the owner's
// lock. A memory written since the snapshot (its updated_at differs) or no
// longer active is left alone: the next pass sees it as fresh.
func (s *maintenance) applyCompactBatch(ctx context.Context, owner string, found []cluster, st compactState) error {
	var losers, keepers []string
	var loserAt, keeperAt []time.Time
	for _, g := range found {
		for _, l := range g.losers {
			losers, loserAt = append(losers, l.id), append(loserAt, l.updatedAt)
			keepers, keeperAt = append(keepers, g.keeper.id), append(keeperAt, g.keeper.updatedAt)
		}
	}
	return (*Store)(s).inTx(ctx, func(tx pgx.Tx) error {
		if len(losers) > 0 {
			if err := (*Store)(s).lockOwner(ctx, tx, owner); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.compactApplySQL(), owner, losers, loserAt, keepers, keeperAt); err != nil {
				return core.DBErr("superseding near-duplicates", err)
			}
		}
		return s.saveCompactState(ctx, tx, owner, st)
	})
}

// compactApplySQL supersedes each loser ($2, as read at $3) by its keeper
// ($4, as read at $5) when both are unchanged, records history, and widens
// a keeper's scope to owner level when its cluster spans agents or sessions.
func (s *maintenance) compactApplySQL() string {
	return `WITH p AS (
			SELECT * FROM unnest($2::uuid[], $3::timestamptz[], $4::uuid[], $5::timestamptz[]) AS p(loser, loser_at, keeper, keeper_at)),
		ok AS (
			SELECT p.* FROM p JOIN ` + s.sql.memories + ` AS k
				ON k.id = p.keeper AND k.owner_id = $1 AND k.active AND k.updated_at = p.keeper_at),
		upd AS (
			UPDATE ` + s.sql.memories + ` AS m SET active = false, superseded_by = ok.keeper, deactivated_at = now()
			FROM ok WHERE m.id = ok.loser AND m.owner_id = $1 AND m.active AND m.superseded_by IS NULL AND m.updated_at = ok.loser_at
			RETURNING m.id, m.owner_id, m.content, m.agent_id, m.session_id, ok.keeper),
		h AS (
			INSERT INTO ` + s.sql.history + ` (memory_id, owner_id, action, actor, old_content, details)
			SELECT id, owner_id, 'compact', 'job', content, jsonb_build_object('supersededBy', keeper::text) FROM upd),
		scope AS (
			SELECT keeper, array_agg(DISTINCT agent_id) AS agents, array_agg(DISTINCT session_id) AS sessions FROM upd GROUP BY keeper)
		UPDATE ` + s.sql.memories + ` AS k SET
			agent_id = CASE WHEN scope.agents <> ARRAY[k.agent_id] THEN '' ELSE k.agent_id END,
			session_id = CASE WHEN scope.sessions <> ARRAY[k.session_id] THEN '' ELSE k.session_id END
		FROM scope WHERE k.id = scope.keeper AND (scope.agents <> ARRAY[k.agent_id] OR scope.sessions <> ARRAY[k.session_id])`
}
