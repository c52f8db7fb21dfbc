package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
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

// TestDecayCandidatesAreExact: decay reads only the rows whose score from
// updated_at alone is below the minimum (memories_decay_idx, issue 32)
// and forgets those whose exact score, which counts the last access, is
// below it. Rows of every category, aged on both sides of their
// category's limit, never, recently or long ago accessed: decay forgets
// exactly the rows the exact score of every row names, and the rows an
// independent computation here names, no more; it still looks at every
// active row once.
func TestDecayCandidatesAreExact(t *testing.T) {
	f := newFixture(t)
	p := f.store.core.Policy
	minScore := p.Forgetting.MinDecayScore
	want := map[string]bool{}
	n := 0
	for _, c := range p.Categories {
		halfLife := time.Duration(c.HalfLife)
		limit := 1000 * 24 * time.Hour // a category that does not decay
		if halfLife > 0 {
			limit = time.Duration(float64(halfLife) * math.Log2(1/minScore))
		}
		for _, age := range []float64{0.5, 0.95, 1.05, 2} {
			for _, access := range []float64{0, 0.5, 3} { // none, recent, older than the write
				n++
				id := f.add(AddRequest{Owner: "d", Content: fmt.Sprintf("%s fact number %d: %s", c.Name, n, decayWords[n%len(decayWords)]),
					Category: c.Name, Source: SourceUser}).Memory.ID
				f.exec(`UPDATE %s SET updated_at = now() - $2::float8 * interval '1 second', expires_at = NULL WHERE id = $1`, id, (time.Duration(age * float64(limit))).Seconds())
				effective := age
				if access > 0 {
					if _, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.access+` (memory_id, owner_id, access_count, last_accessed_at)
						VALUES ($1, 'd', 1, now() - $2::float8 * interval '1 second')`, id, (time.Duration(access * float64(limit))).Seconds()); err != nil {
						t.Fatal(err)
					}
					effective = min(age, access)
				}
				if halfLife > 0 && effective > 1 {
					want[id] = true
				}
			}
		}
	}
	exact := f.texts(`SELECT m.id::text FROM `+f.store.sql.memories+` AS m WHERE m.active AND `+f.store.sql.decayExpr("$1", "$2")+` < $3 ORDER BY m.id`,
		f.store.decayNames, f.store.decaySeconds, minScore)
	if len(exact) != len(want) {
		t.Fatalf("the exact score names %d rows, this test %d: the test is wrong", len(exact), len(want))
	}
	active := f.count(`SELECT count(*) FROM %s WHERE active`)
	dry, err := f.store.RunJob(ctx(t), OpDecay, JobOptions{DryRun: true, BatchSize: 7})
	if err != nil || dry.Affected != int64(len(want)) || dry.Scanned != active {
		t.Fatalf("dry run = %+v, %v; want %d of %d", dry, err, len(want), active)
	}
	res, err := f.store.RunJob(ctx(t), OpDecay, JobOptions{BatchSize: 7})
	if err != nil || res.Affected != int64(len(want)) || res.Scanned != active || res.Batches < 2 {
		t.Fatalf("decay = %+v, %v; want %d forgotten of %d scanned, in several batches", res, err, len(want), active)
	}
	forgotten := f.texts(`SELECT id::text FROM ` + f.store.sql.memories + ` WHERE NOT active ORDER BY id`)
	if !slices.Equal(forgotten, exact) {
		t.Fatalf("decay forgot %v, the exact score names %v", forgotten, exact)
	}
	for _, id := range forgotten {
		if !want[id] {
			t.Fatalf("decay forgot %s, which this test keeps", id)
		}
	}
}

// decayWords keep the texts of TestDecayCandidatesAreExact apart (no dedup).
var decayWords = []string{"apples and pears", "the blue harbour", "quarterly budget review", "a violin lesson",
	"mountain trail maps", "the kitchen tiles", "tax forms due", "an old chess opening", "the garden hose", "train timetables",
	"solar panel quotes", "a birthday cake"}
