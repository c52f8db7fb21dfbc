package conversation

import (
	"context"
	"fmt"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

// maxSessionDeleteBatch bounds the sessions one statement of the sessions
// job deletes: each takes its messages and summaries with it (cascade), so
// a batch of long sessions is many rows.
const maxSessionDeleteBatch = 100

// SummarizeSessions is the summarize operation: an incremental compaction
// of every session whose unsummarized tokens exceed the threshold, read in
// pages of BatchSize sessions (keyset over the primary key, so each session
// is looked at once per run). Scanned counts the sessions due, Affected
// those that got new summaries. A dry run counts the sessions due.
func (s *Store) SummarizeSessions(ctx context.Context, opts core.JobOptions, res *core.JobResult) error {
	c := s.core.Policy.Conversation
	due := fmt.Sprintf(`token_count - summarized_tokens > %f`, c.Compaction.Threshold*float64(c.Window.Budget))
	if opts.DryRun {
		return s.core.Count(ctx, res, `SELECT count(*) FROM `+s.sql.sessions+` WHERE `+due)
	}
	afterOwner, afterID := "", ""
	for {
		rows, err := s.core.Pool.Query(ctx, `SELECT owner_id, id FROM `+s.sql.sessions+`
			WHERE (owner_id, id) > ($1, $2) AND `+due+` ORDER BY owner_id, id LIMIT $3`, afterOwner, afterID, opts.BatchSize)
		if err != nil {
			return core.DBErr("finding sessions to summarize", err)
		}
		var keys [][2]string
		for rows.Next() {
			var k [2]string
			if err := rows.Scan(&k[0], &k[1]); err != nil {
				rows.Close()
				return core.DBErr("finding sessions to summarize", err)
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return core.DBErr("finding sessions to summarize", err)
		}
		res.Batches++
		for _, k := range keys {
			r, err := s.CompactSession(ctx, CompactSessionRequest{Owner: k[0], SessionID: k[1], Mode: CompactIncremental})
			if err != nil {
				return fmt.Errorf("compacting a session of owner %d: %w", core.Hash32(k[0]), err)
			}
			res.Scanned++
			if r.LeavesCreated+r.CondensedCreated > 0 {
				res.Affected++
			}
		}
		if len(keys) < opts.BatchSize {
			return nil
		}
		afterOwner, afterID = keys[len(keys)-1][0], keys[len(keys)-1][1]
	}
}

// ExpireSessions is the sessions operation: it archives sessions idle for
// longer than archiveAfter and deletes those idle for longer than
// sessionIdleTTL with their messages and summaries, in bounded batches
// (sessions an append holds are skipped, and are not idle anyway). Scanned
// and Affected count the sessions archived plus those deleted.
func (s *Store) ExpireSessions(ctx context.Context, opts core.JobOptions, res *core.JobResult) error {
	c := s.core.Policy.Conversation
	idle := func(d policy.Duration) string {
		return fmt.Sprintf(`last_active_at < now() - make_interval(secs => %f)`, time.Duration(d).Seconds())
	}
	if c.ArchiveAfter > 0 {
		cond := `NOT archived AND ` + idle(c.ArchiveAfter)
		if c.SessionIdleTTL > 0 {
			cond += ` AND NOT ` + idle(c.SessionIdleTTL) // deleted below anyway
		}
		if err := s.sessionBatches(ctx, opts, res, "archiving idle sessions", cond, `UPDATE `+s.sql.sessions+` AS c SET archived = true
			FROM d WHERE c.owner_id = d.owner_id AND c.id = d.id RETURNING 1`); err != nil {
			return err
		}
	}
	if c.SessionIdleTTL > 0 {
		return s.sessionBatches(ctx, opts, res, "deleting idle sessions", idle(c.SessionIdleTTL), `DELETE FROM `+s.sql.sessions+` AS c
			USING d WHERE c.owner_id = d.owner_id AND c.id = d.id RETURNING 1`)
	}
	return nil
}

// sessionBatches runs change (a statement over d, the batch of sessions
// matching cond, RETURNING a row each) until a batch is short; a dry run
// counts the sessions matching cond.
func (s *Store) sessionBatches(ctx context.Context, opts core.JobOptions, res *core.JobResult, what, cond, change string) error {
	if opts.DryRun {
		var n int64
		if err := s.core.Pool.QueryRow(ctx, `SELECT count(*) FROM `+s.sql.sessions+` WHERE `+cond).Scan(&n); err != nil {
			return core.DBErr(what, err)
		}
		res.Batches++
		res.Scanned += n
		res.Affected += n
		return nil
	}
	opts.BatchSize = min(opts.BatchSize, maxSessionDeleteBatch)
	return s.core.Batches(ctx, opts, res, what, `WITH d AS (
			SELECT owner_id, id FROM `+s.sql.sessions+` WHERE `+cond+`
			ORDER BY last_active_at LIMIT $1 FOR UPDATE SKIP LOCKED),
		x AS (`+change+`)
		SELECT count(*) FROM x`)
}
