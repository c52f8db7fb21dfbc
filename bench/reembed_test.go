package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/jobrun"
	"github.com/engram-dev/engram/internal/memory"
)

// TestPaceForDuty: the loop's pause of Pace times each batch's duration
// fills duty of the time: 1 unpaced, 0.5 a pause as long as the batch.
func TestPaceForDuty(t *testing.T) {
	for duty, want := range map[float64]float64{1: 0, 0.5: 1, 0.25: 3, 0.8: 0.25, 0: 0} {
		pace := paceForDuty(duty)
		if pace != want {
			t.Errorf("paceForDuty(%g) = %g, want %g", duty, pace, want)
		}
		if duty > 0 && round3(1/(1+pace)) != round3(duty) {
			t.Errorf("pace %g fills %g of the time, not %g", pace, 1/(1+pace), duty)
		}
	}
}

// scriptFiller fills n rows a batch until rows run out, then reports done.
type scriptFiller struct{ left int64 }

func (s *scriptFiller) FillBatch(_ context.Context, n int) (int64, bool, error) {
	if s.left == 0 {
		return 0, true, nil
	}
	k := min(int64(n), s.left)
	s.left -= k
	return k, false, nil
}

// TestCountingFillerStopsTheJobLoop: with a limit the Job's own loop ends
// cleanly (as after a switch) once that many rows are filled; without one
// it reports when the rows ran out, and the switch (the inner filler's
// ErrNotFilling) ends the loop.
func TestCountingFillerStopsTheJobLoop(t *testing.T) {
	f := newCountingFiller(100)
	f.inner = &scriptFiller{left: 1000}
	res, err := jobrun.ReembedLoop{Filler: f, Batch: 64, MaxRun: time.Minute, UnreachableAfter: time.Minute}.Run(context.Background())
	if err != nil || !res.Done || res.Filled != 128 || f.rows.Load() != 128 || f.batches.Load() != 2 {
		t.Fatalf("limit 100: %+v, %v, counted %d rows in %d batches; want 2 batches of 64, then a clean end", res, err, f.rows.Load(), f.batches.Load())
	}
	select {
	case <-f.caughtUp:
		t.Fatal("caught up with rows left")
	default:
	}

	g := newCountingFiller(0)
	inner := &switchingFiller{scriptFiller: scriptFiller{left: 200}}
	g.inner = inner
	done := make(chan error, 1)
	go func() {
		_, err := jobrun.ReembedLoop{Filler: g, Batch: 64, MaxRun: time.Minute, UnreachableAfter: time.Minute, Idle: time.Millisecond}.Run(context.Background())
		done <- err
	}()
	select {
	case <-g.caughtUp:
	case <-time.After(10 * time.Second):
		t.Fatal("no catch-up reported")
	}
	fill := g.fill(g.onFor(g.start, time.Now().Add(time.Hour)))
	if fill.Rows != 200 || fill.Batches != 4 || fill.RowsSec <= 0 || fill.Sec > 10 {
		t.Errorf("until caught up: %+v, want 200 rows in 4 batches, timed until the catch-up", fill)
	}
	inner.switched.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end after the switch")
	}
}

// TestCountingFillerHolds: held, the Job's loop goes on but fills nothing
// (the inner filler is not called); released, it fills again.
func TestCountingFillerHolds(t *testing.T) {
	f := newCountingFiller(0)
	inner := &switchingFiller{scriptFiller: scriptFiller{left: 1 << 30}}
	f.inner = inner
	ctx := context.Background()
	if err := f.hold(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := jobrun.ReembedLoop{Filler: f, Batch: 64, Pace: 1, MaxRun: time.Minute, UnreachableAfter: time.Minute}.Run(ctx)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if n := f.rows.Load(); n != 0 || inner.left != 1<<30 {
		t.Fatalf("held: %d rows filled", n)
	}
	f.release()
	for deadline := time.Now().Add(10 * time.Second); f.rows.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := f.hold(ctx); err != nil {
		t.Fatal(err)
	}
	n := f.rows.Load()
	time.Sleep(100 * time.Millisecond)
	if n == 0 || f.rows.Load() != n {
		t.Fatalf("released then held: %d rows, then %d", n, f.rows.Load())
	}
	inner.switched.Store(true)
	f.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type switchingFiller struct {
	scriptFiller
	switched atomic.Bool
}

func (s *switchingFiller) FillBatch(ctx context.Context, n int) (int64, bool, error) {
	if s.switched.Load() {
		return 0, false, memory.ErrReembedNotFilling
	}
	return s.scriptFiller.FillBatch(ctx, n)
}

// TestNetOfLoad: the load's CPU per operation alone, scaled to the
// operations during, comes off; never below 0.
func TestNetOfLoad(t *testing.T) {
	during := cpuTotals{service: 3, coordinator: 10, harness: 8}
	alone := cpuTotals{service: 1, coordinator: 2, harness: 1}
	got := netOfLoad(during, alone, 100, 200)
	if got.service != 1 || got.coordinator != 6 || got.harness != 6 {
		t.Errorf("netOfLoad = %+v, want service 1, database 6, harness 6", got)
	}
	if got := netOfLoad(during, alone, 100, 1000); got.service != 0 || got.coordinator != 0 {
		t.Errorf("netOfLoad past zero = %+v, want 0", got)
	}
	c := perThousand(cpuTotals{coordinator: 4, harness: 2}, 2000)
	if c.DatabaseSec != 2 || c.HarnessSec != 1 {
		t.Errorf("perThousand = %+v", c)
	}
}

// TestReembedTargets: search p99 during ÷ alone against 1.5x per duty;
// recall after the switch is a check (a miss fails the run).
func TestReembedTargets(t *testing.T) {
	st := func(p99 float64) RunStats { return RunStats{Ops: 10, Latency: Latency{P99: p99}} }
	rep := &Report{Reembed: &ReembedReport{Memories: goalMemories, Passes: []ReembedPass{
		{Duty: 1, SearchAlone: st(10), SearchDuring: st(25), SearchP99Factor: 2.5, RecallQueries: 10, Recall: 1, MinRecall: 1, VectorsChecked: 10},
		{Duty: 0.5, SearchAlone: st(10), SearchDuring: st(14), SearchP99Factor: 1.4, RecallQueries: 10, Recall: 0.99, MinRecall: 0.9, VectorsChecked: 10},
	}}}
	got := map[string]Target{}
	for _, tg := range targets(rep) {
		got[tg.Name] = tg
	}
	for name, met := range map[string]bool{
		"vector search p99 during the re-embed fill (duty 1.00) / alone": false,
		"vector search p99 during the re-embed fill (duty 0.50) / alone": true,
		"recall@10 under the new embedder after the switch (duty 1.00)":  true,
		"recall@10 under the new embedder after the switch (duty 0.50)":  false,
	} {
		tg, ok := got[name]
		if !ok || tg.Met != met {
			t.Errorf("%s: %+v (present %v), want met %v", name, tg, ok, met)
		}
		if strings.HasPrefix(name, "recall") && !tg.Check {
			t.Errorf("%s is not a check", name)
		}
	}
	if _, err := parseDutyList("--reembed-duty", "1,2"); err == nil || !strings.Contains(err.Error(), "--reembed-duty") {
		t.Errorf("a duty of 2 accepted or the error does not name the flag: %v", err)
	}
}
