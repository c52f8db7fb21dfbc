package jobrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// TestReembedOperationFillsAndPausesOnAnUnreachableEmbedder: `manager job
// --ops=reembed` with the embedder down ends within its bound, exit code
// 3, nothing filled and nothing lost; with the embedder back the next run
// fills every row (from where the rows left off), and the switch finds
// none left and the fake's vectors in place.
func TestReembedOperationFillsAndPausesOnAnUnreachableEmbedder(t *testing.T) {
	jt := newJobTenant(t)
	ctx := context.Background()
	jt.addTopics(t, 5, "memory %d about topic %d")
	target := jt.beginReembed(t, ctx, fakeTo())
	fake := newFakeEmbedder(t)
	args := []string{"--ops=reembed", "--reembed-provider=openai", "--reembed-model=" + fakeModel, "--reembed-endpoint=" + fake.srv.URL + "/v1",
		fmt.Sprintf("--reembed-dimensions=%d", dims), "--reembed-pace=0.1"}

	fake.down.Store(true)
	start := time.Now()
	code, sum, _ := runMain(t, jt, append(args, "--reembed-unreachable-after=1500ms")...)
	took := time.Since(start)
	t.Logf("embedder down: exit %d after %s, %d calls: %s", code, took.Round(time.Millisecond), fake.calls.Load(), sum.Message)
	if code != ExitEmbedderUnreachable || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "embedder kept failing") {
		t.Errorf("exit %d, summary %+v; want exit %d and a failed run naming the embedder", code, sum, ExitEmbedderUnreachable)
	}
	if took > 20*time.Second || fake.calls.Load() < 2 {
		t.Errorf("the run took %s with %d calls: want a few retries within the bound", took, fake.calls.Load())
	}
	p, err := memory.ReadReembedProgress(ctx, jt.admin, target)
	if err != nil || p.Phase != memory.ReembedPhaseFilling || p.Filled != 0 || p.LeftTotal != 5 {
		t.Fatalf("after the failed run: %+v (%v), want filling, 0 filled, 5 left", p, err)
	}

	// With the embedder back the run fills every row, then keeps looking
	// for more until the re-embed is switched (as the operator does when
	// it reads no row left), and ends then with exit 0.
	fake.down.Store(false)
	type result struct {
		code int
		sum  memory.JobSummary
	}
	ran := make(chan result, 1)
	go func() {
		code, sum, _ := runMain(t, jt, append(args, "--reembed-max-run=40s")...)
		ran <- result{code, sum}
	}()
	switched := false
	for deadline := time.Now().Add(30 * time.Second); !switched && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		p, err := memory.ReadReembedProgress(ctx, jt.admin, target)
		if err != nil {
			t.Fatal(err)
		}
		if p.LeftTotal > 0 {
			continue
		}
		if err := memory.ReembedSwitch(ctx, jt.admin, target); err != nil {
			t.Fatal(err)
		}
		switched = true
	}
	if !switched {
		t.Fatal("the run left rows unfilled for 30s")
	}
	var res result
	select {
	case res = <-ran:
	case <-time.After(15 * time.Second):
		t.Fatal("the run did not end within 15s of the switch")
	}
	if res.code != 0 || res.sum.Result != memory.RunSucceeded || affected(res.sum)[OpReembed] != 5 || res.sum.Message != "" {
		t.Fatalf("with the embedder back: exit %d, %+v; want 5 rows filled and a run that ended with the switch", res.code, res.sum)
	}
	if n := checkFakeVectors(t, ctx, jt.admin, jt.schema)["memories"]; n != 5 {
		t.Errorf("after the switch: %d memories with a vector, want 5", n)
	}
}

// scriptedFiller answers FillBatch from a script of results.
type scriptedFiller struct {
	script []fillStep
	calls  int
}

type fillStep struct {
	n    int64
	done bool
	err  error
	took time.Duration
}

func (f *scriptedFiller) FillBatch(context.Context, int) (int64, bool, error) {
	s := f.script[min(f.calls, len(f.script)-1)]
	f.calls++
	time.Sleep(s.took)
	return s.n, s.done, s.err
}

// TestReembedLoopPacesBacksOffAndStops: a pause after each batch in
// proportion to its duration; on embedder errors a doubling backoff that
// starts again after a success; a database error ends the run; an ended
// re-embed is done; MaxRun ends a run with rows left.
func TestReembedLoopPacesBacksOffAndStops(t *testing.T) {
	embErr := embedderError{errors.New("503")}
	f := &scriptedFiller{script: []fillStep{
		{n: 10, took: 20 * time.Millisecond}, {err: embErr}, {err: embErr}, {n: 5, took: 20 * time.Millisecond}, {err: embErr},
		{done: true}, {n: 1}, {done: true}, {err: memory.ErrReembedNotFilling},
	}}
	var slept []time.Duration
	loop := ReembedLoop{Filler: f, Batch: 10, Pace: 2, MaxRun: time.Minute, UnreachableAfter: time.Minute, Idle: 300 * time.Millisecond,
		sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
	res, err := loop.Run(context.Background())
	if err != nil || !res.Done || !res.CaughtUp || res.Filled != 16 || res.Batches != 3 {
		t.Fatalf("Run = %+v, %v; want done (switched), 16 filled in 3 batches, caught up", res, err)
	}
	// pace ≥ 2×20ms, backoff 1s, 2s, pace, backoff 1s again; no row left:
	// idle, a row the service wrote (a pause of next to nothing), idle, then the
	// switch ends the run.
	if len(slept) != 8 || slept[0] < 40*time.Millisecond || slept[1] != time.Second || slept[2] != 2*time.Second ||
		slept[3] < 40*time.Millisecond || slept[4] != time.Second || slept[5] != 300*time.Millisecond || slept[6] > 10*time.Millisecond ||
		slept[7] != 300*time.Millisecond {
		t.Errorf("pauses %v", slept)
	}
	// No row left and never switched: the run ends at MaxRun, caught up.
	loop.Filler, loop.MaxRun, loop.sleep = &scriptedFiller{script: []fillStep{{done: true}}}, 100*time.Millisecond, nil
	loop.Idle = 20 * time.Millisecond
	if res, err := loop.Run(context.Background()); err != nil || res.Done || !res.CaughtUp {
		t.Errorf("caught up, never switched: %+v, %v; want a run that ended at MaxRun, caught up and not done", res, err)
	}
	loop.MaxRun, loop.sleep = time.Minute, func(context.Context, time.Duration) error { return nil }

	dbErr := &scriptedFiller{script: []fillStep{{n: 3}, {err: errors.New("connection reset")}}}
	loop.Filler = dbErr
	if _, err := loop.Run(context.Background()); err == nil || errors.Is(err, ErrEmbedderUnreachable) {
		t.Errorf("a database error: %v, want a failed run that is not the embedder's", err)
	}
	loop.Filler = &scriptedFiller{script: []fillStep{{err: memory.ErrReembedNotFilling}}}
	if res, err := loop.Run(context.Background()); err != nil || !res.Done {
		t.Errorf("an ended re-embed: %+v, %v; want done", res, err)
	}
	loop.Filler, loop.MaxRun = &scriptedFiller{script: []fillStep{{n: 1, took: 5 * time.Millisecond}}}, 30*time.Millisecond
	loop.Pace = 0
	if res, err := loop.Run(context.Background()); err != nil || res.Done || res.Filled == 0 {
		t.Errorf("MaxRun: %+v, %v; want a run that stopped with rows left", res, err)
	}
}
