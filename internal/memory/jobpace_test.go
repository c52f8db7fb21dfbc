package memory

import (
	"context"
	"testing"
	"time"
)

// batchClock is a core.PaceClock on which every reading advances 10 ms (a
// batch "takes" 10 ms) and a sleep advances the time slept.
type batchClock struct{ now time.Time }

func (c *batchClock) Now() time.Time {
	c.now = c.now.Add(10 * time.Millisecond)
	return c.now
}

func (c *batchClock) Sleep(ctx context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return ctx.Err()
}

// TestPacedJobsDoTheSameWork: with a duty cycle of 0.25 every operation
// changes exactly what the unpaced run of TestJobs changes, and pauses
// 3 x 10 ms between every two of its batches (none before the first batch
// of each batch loop: purge has two, its memories and its eviction rows).
func TestPacedJobsDoTheSameWork(t *testing.T) {
	f, before, activeBefore := newJobsFixture(t)
	want := seedJobsAffected
	loops := map[string]int{OpDecay: 1, OpExpire: 1, OpPurge: 2, OpCompact: 1}
	for _, op := range []string{OpDecay, OpExpire, OpPurge, OpCompact} {
		res, err := f.store.RunJob(ctx(t), op, JobOptions{BatchSize: 2, Duty: 0.25, Clock: &batchClock{now: time.Unix(0, 0)}})
		if err != nil || res.Affected != want[op] {
			t.Fatalf("paced %s = %+v, %v; want %d affected", op, res, err, want[op])
		}
		if res.Batches <= loops[op] {
			t.Fatalf("paced %s ran %d batches: want more than %d, so that it pauses", op, res.Batches, loops[op])
		}
		if wantPause := time.Duration(res.Batches-loops[op]) * 30 * time.Millisecond; res.Paused != wantPause {
			t.Errorf("paced %s: paused %s over %d batches, want %s", op, res.Paused, res.Batches, wantPause)
		}
	}
	checkJobsDone(t, f, before, activeBefore)
	for _, op := range Operations {
		if res, err := f.store.RunJob(ctx(t), op, JobOptions{Duty: 0.25}); err != nil || res.Affected != 0 {
			t.Fatalf("second %s run = %+v, %v; want nothing left to do", op, res, err)
		}
	}
}
