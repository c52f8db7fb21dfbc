package jobrun

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// TestReembedSwitchesUnderSteadyWrites reproduces the hostile review's H4
// on real PostgreSQL: a service of the old embedder adds a memory every
// 200 ms throughout, the re-embed run fills and then keeps filling what
// the service writes, and a switcher (the operator's poll, every 500 ms)
// calls Switch whenever it reads no row left. Before, a run ended when it
// found none left and the operator switched only after it completed, so
// a row written in between sent the re-embed into another pass, forever.
// Now: the switch goes through within a bounded number of tries, the run
// ends with it (exit 0, done), no write before the switch failed, and
// every memory, the writer's included, holds the new embedder's vector of
// its text.
func TestReembedSwitchesUnderSteadyWrites(t *testing.T) {
	jt := newJobTenant(t)
	jt.addTopics(t, 40, "seeded memory %d about topic %d")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	to := fakeTo()
	target := jt.beginReembed(t, ctx, to)
	emb := newFakeEmbedder(t).embedder(t)
	login, err := memory.NewPool(ctx, jt.loginURL, 2, memory.SessionSettings{LockTimeout: 5 * time.Second, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer login.Close()

	// The writer: a memory every 200 ms until the switch (after it, the
	// old embedder's writes are refused by the guard: the service waits
	// for its rollout), at most 600.
	var before atomic.Int64
	stop := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		defer close(wrote)
		for i := range 600 {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			_, err := jt.store.Add(ctx, memory.AddRequest{Owner: "bob", Content: fmt.Sprintf("steady write %d: the build moved to week %d", i, 100+i)})
			if err != nil {
				if p, perr := memory.ReadReembedProgress(ctx, jt.admin, target); perr == nil && p.Phase != memory.ReembedPhaseFilling {
					return // switched: the old embedder's writes end here
				}
				wrote <- fmt.Errorf("write %d before the switch: %w", i, err)
				return
			}
			before.Add(1)
		}
	}()

	loop := ReembedLoop{Filler: memory.NewReembedFiller(login, target, to, markedEmbedder{emb}), Batch: 16, Pace: 0.5,
		MaxRun: 90 * time.Second, UnreachableAfter: time.Minute, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	waitLoop := startLoop(ctx, loop)

	// The switcher: the operator's poll, from the 10th write on (the fill
	// of the 40 seeded rows is faster than that).
	for i := 0; before.Load() < 10 && i < 100; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	const maxTries = 60
	tries, rowsLeft := 0, 0
	switched := false
	for polls := 0; !switched && tries < maxTries && polls < 2*maxTries; polls++ {
		time.Sleep(500 * time.Millisecond)
		p, err := memory.ReadReembedProgress(ctx, jt.admin, target)
		if err != nil {
			t.Fatal(err)
		}
		if polls%10 == 0 {
			t.Logf("poll %d: %d filled, %d left, %d writes", polls, p.Filled, p.LeftTotal, before.Load())
		}
		if p.LeftTotal > 0 {
			continue
		}
		tries++
		switched = trySwitch(t, ctx, jt.admin, target, &rowsLeft)
	}
	close(stop)
	if werr := <-wrote; werr != nil {
		t.Error(werr)
	}
	if !switched {
		t.Fatalf("not switched after %d tries (%d found rows written since the count)", tries, rowsLeft)
	}
	res := waitLoop(t, "the run", 10*time.Second)
	if before.Load() < 5 {
		t.Errorf("only %d writes before the switch: not a steady writer", before.Load())
	}

	if n := checkFakeVectors(t, ctx, jt.admin, jt.schema)["memories"]; int64(n) != 40+before.Load() {
		t.Errorf("after the switch: %d memories with a vector, want %d", n, 40+before.Load())
	}
	t.Logf("switched at try %d (%d found a row written since the count); %d writes before the switch, %d rows filled in %d batches",
		tries, rowsLeft, before.Load(), res.Filled, res.Batches)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
