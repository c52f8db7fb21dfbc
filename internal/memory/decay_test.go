package memory

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// cutClock is a core.PaceClock whose first pause ends the run: a run
// paced so slowly, or so close to its deadline, that it finishes one batch.
type cutClock struct {
	batchClock
	cancel context.CancelFunc
}

func (c *cutClock) Sleep(ctx context.Context, d time.Duration) error {
	c.cancel()
	return context.Canceled
}

// TestDecayGoesOnWhereTheLastRunStopped: runs cut after one batch each
// walk on from the last one instead of starting again at the lowest id,
// so decayed memories among the highest ids are reached although every
// run is cut (before, each run looked at the same lowest batch and the
// high ids starved); an uncut run then wraps around and looks at every
// active memory exactly once; a dry run moves no cursor.
func TestDecayGoesOnWhereTheLastRunStopped(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Forgetting.MinDecayScore = 0.5 }))
	for i := range 12 {
		f.add(AddRequest{Owner: "d", Content: fmt.Sprintf("contextual note %d about %c", i, 'a'+i), Category: "contextual", Source: SourceUser})
	}
	ids := f.activeIDs()
	if len(ids) != 12 {
		t.Fatalf("%d active memories, want 12", len(ids))
	}
	// The three highest ids decay below the minimum; the rest are fresh.
	for _, id := range ids[9:] {
		f.exec(`UPDATE %s SET updated_at = now() - interval '40 days', expires_at = NULL WHERE id = $1`, id)
	}

	var scanned, forgotten int64
	for run := range 4 {
		runCtx, cancel := context.WithCancel(ctx(t))
		res, err := f.store.RunJob(runCtx, OpDecay, JobOptions{BatchSize: 3, Duty: 0.5, Clock: &cutClock{batchClock{now: time.Unix(0, 0)}, cancel}})
		cancel()
		if err == nil || res.Batches != 1 || res.Scanned != 3 {
			t.Fatalf("cut run %d = %+v, %v; want one batch of 3 and the cut's error", run, res, err)
		}
		scanned += res.Scanned
		forgotten += res.Affected
		if got := f.decayCursor(); got != ids[3*run+2] {
			t.Fatalf("after cut run %d the cursor is %q, want the batch's last id %q", run, got, ids[3*run+2])
		}
	}
	if scanned != 12 || forgotten != 3 {
		t.Fatalf("four cut runs scanned %d and forgot %d, want every one of 12 once and the 3 decayed", scanned, forgotten)
	}
	for _, id := range ids[9:] {
		if n := f.count(`SELECT count(*) FROM %s WHERE id = $1 AND active`, id); n != 0 {
			t.Fatalf("decayed memory %s is still active", id)
		}
	}

	dry, err := f.store.RunJob(ctx(t), OpDecay, JobOptions{DryRun: true, BatchSize: 2})
	if err != nil || dry.Scanned != 9 || dry.Affected != 0 {
		t.Fatalf("dry run = %+v, %v; want 9 scanned from the lowest id, nothing to forget", dry, err)
	}
	if got := f.decayCursor(); got != ids[11] {
		t.Fatalf("a dry run moved the cursor to %q", got)
	}

	// The cursor is past every active id: the uncut run finds nothing
	// above it, wraps around, and looks at the 9 active ones once.
	full, err := f.store.RunJob(ctx(t), OpDecay, JobOptions{BatchSize: 2})
	if err != nil || full.Scanned != 9 || full.Affected != 0 {
		t.Fatalf("uncut run = %+v, %v; want the 9 active memories scanned once", full, err)
	}
	if got := f.decayCursor(); got != ids[8] {
		t.Fatalf("after the uncut run the cursor is %q, want the highest active id %q", got, ids[8])
	}
}

// activeIDs lists the active memories' ids in decay's walking order.
func (f *fixture) activeIDs() []string {
	f.t.Helper()
	return f.texts(`SELECT id::text FROM ` + f.store.sql.memories + ` WHERE active ORDER BY id`)
}

// decayCursor reads where decay's walk stopped ("" when no run stopped).
func (f *fixture) decayCursor() string {
	f.t.Helper()
	var after string
	err := f.admin.QueryRow(ctx(f.t), `SELECT coalesce((SELECT after_id::text FROM `+f.store.sql.jobCursors+` WHERE operation = 'decay'), '')`).Scan(&after)
	if err != nil {
		f.t.Fatal(err)
	}
	return after
}
