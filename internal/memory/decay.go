package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
)

// The ends of the uuid order decay walks in.
const (
	lowestID  = "00000000-0000-0000-0000-000000000000"
	highestID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
)

// decayCandidateSlack widens decay's candidate test (a relative 1e-9, far
// above exp's error of an ulp, 2e-16) so that rounding cannot drop a row
// the exact test forgets; the extra candidates only cost a table read.
const decayCandidateSlack = "1.000000001"

// decayCursor names decay's row of job_cursors.
const decayCursor = "decay"

// decay forgets (soft-deletes) active memories whose decay score is below
// forgetting.minDecayScore. It walks the table in primary-key order, one
// batch per statement, so every row is looked at once per walk (no
// rescans). A walk starts where the last run stopped (job_cursors, moved
// on by each batch's own statement), goes to the highest id and wraps
// around to where it began: a run paced to a low duty or cut by its
// deadline leaves the next run the rest instead of starting again from the
// lowest id, which starved the high ids (issue 32). A dry run walks the
// whole table from the lowest id and moves no cursor.
func (s *maintenance) decay(ctx context.Context, opts JobOptions, res *JobResult) error {
	min := s.core.Policy.Forgetting.MinDecayScore
	if min <= 0 {
		return nil
	}
	start := lowestID
	if !opts.DryRun {
		var err error
		if start, err = s.decayStart(ctx); err != nil {
			return err
		}
	}
	sql := s.decaySQL(opts.DryRun)
	pace := core.NewPace(opts, res)
	// The first leg runs from start to the highest id, the second (when
	// start is not the lowest id) from the lowest id up to start.
	after, upTo, wrapped := start, highestID, start == lowestID
	for {
		if err := pace.Next(ctx); err != nil {
			return fmt.Errorf("forgetting decayed memories: %w", err)
		}
		var last *string
		var scanned, affected int64
		err := s.core.Pool.QueryRow(ctx, sql, after, opts.BatchSize, min, s.decayNames, s.decaySeconds, upTo).Scan(&last, &scanned, &affected)
		if err != nil {
			return core.DBErr("forgetting decayed memories", err)
		}
		pace.Rows(scanned)
		res.Batches++
		res.Scanned += scanned
		res.Affected += affected
		if last != nil && scanned == int64(opts.BatchSize) {
			after = *last
			continue
		}
		if wrapped {
			return nil
		}
		after, upTo, wrapped = lowestID, start, true
	}
}

// decaySQL is one batch of decay: the next BatchSize active memories after
// $1 up to $6, the ones below the score forgotten with their history, and
// (not in a dry run) the cursor moved to the batch's last id in the same
// statement, so a run stopped between batches resumes after the last one
// that committed. (Citus refuses a function in DO UPDATE SET: the time
// comes through EXCLUDED.)
//
// The batch is read from memories_decay_idx (migration 23: the active rows
// in id order with category and updated_at), an index-only scan that no
// longer fetches the inactive rows of the range nor every active one from
// the table (issue 32). Only a candidate, a row whose score computed from
// updated_at alone is below the minimum, is read from the table and
// checked with the exact score (decayExpr, which also counts the last
// access). The candidate test cannot drop a row the exact test forgets: a
// last access only makes the age smaller and the score grows as the age
// shrinks, so the score from updated_at alone is never above the exact
// one. In floating point every step but exp is correctly rounded, hence
// monotonic; exp is within an ulp, which decayCandidateSlack covers.
// TestDecayCandidatesAreExact checks the forgotten rows against the
// exact score of every row.
func (s *maintenance) decaySQL(dryRun bool) string {
	change := `,
		u AS (
			UPDATE ` + s.sql.memories + ` AS m SET active = false, deactivated_at = now()
			FROM f WHERE m.id = f.id AND m.active RETURNING m.id, m.owner_id, m.content),
		h AS (
			INSERT INTO ` + s.sql.history + ` (memory_id, owner_id, action, actor, old_content, details)
			SELECT id, owner_id, 'forget', 'job', content, jsonb_build_object('minDecayScore', $3::float8) FROM u),
		c AS (
			INSERT INTO ` + s.sql.jobCursors + ` AS c (operation, after_id, updated_at)
			SELECT '` + decayCursor + `', id, now() FROM last
			ON CONFLICT (operation) DO UPDATE SET after_id = EXCLUDED.after_id, updated_at = EXCLUDED.updated_at)`
	count := `(SELECT count(*) FROM u)`
	if dryRun {
		change, count = "", `(SELECT count(*) FROM f)`
	}
	return `WITH b AS (
			SELECT m.id, m.category, m.updated_at FROM ` + s.sql.memories + ` AS m
			WHERE m.active AND m.id > $1::uuid AND m.id <= $6::uuid ORDER BY m.id LIMIT $2),
		f AS (
			SELECT m.id FROM b JOIN ` + s.sql.memories + ` AS m ON m.id = b.id
			WHERE ` + write.DecayExprAt("b", "b.updated_at", "$4", "$5") + ` < $3::float8 * ` + decayCandidateSlack + `
				AND m.active AND ` + s.sql.decayExpr("$4", "$5") + ` < $3::float8),
		last AS (SELECT id FROM b ORDER BY id DESC LIMIT 1)` + change + `
		SELECT (SELECT id::text FROM last), (SELECT count(*) FROM b), ` + count
}

// decayStart reads where the last run's walk stopped; the lowest id when
// no run has stopped yet.
func (s *maintenance) decayStart(ctx context.Context) (string, error) {
	var after string
	err := s.core.Pool.QueryRow(ctx, `SELECT after_id::text FROM `+s.sql.jobCursors+` WHERE operation = $1`, decayCursor).Scan(&after)
	if errors.Is(err, pgx.ErrNoRows) {
		return lowestID, nil
	}
	if err != nil {
		return "", core.DBErr("reading where the last decay stopped", err)
	}
	return after, nil
}
