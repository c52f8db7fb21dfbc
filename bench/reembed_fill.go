package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// countingFiller stands between the Job's loop and the re-embed's Filler:
// it counts the rows and batches filled, closes caughtUp when a batch first
// finds no row left, and with a limit ends the loop the way a switch does
// (ErrReembedNotFilling) once that many rows are filled. While held it
// fills nothing: each batch waits a tick and is empty (the loop paces it
// as any batch, by the tick).
type countingFiller struct {
	inner interface {
		FillBatch(ctx context.Context, n int) (int64, bool, error)
	}
	limit     int64
	rows      atomic.Int64
	batches   atomic.Int64
	caughtAt  atomic.Int64 // unix nanoseconds
	caughtUp  chan struct{}
	closeOnce sync.Once
	start     time.Time
	mu        sync.Mutex
	held      bool
	busy      bool // a batch of inner is under way
}

// holdTick is how long a held batch waits.
const holdTick = 20 * time.Millisecond

func newCountingFiller(limit int64) *countingFiller {
	return &countingFiller{limit: limit, caughtUp: make(chan struct{}), start: time.Now()}
}

func (f *countingFiller) FillBatch(ctx context.Context, n int) (int64, bool, error) {
	if f.limit > 0 && f.rows.Load() >= f.limit {
		return 0, false, memory.ErrReembedNotFilling
	}
	f.mu.Lock()
	if f.held {
		f.mu.Unlock()
		return 0, false, memory.Sleep(ctx, holdTick)
	}
	f.busy = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.busy = false
		f.mu.Unlock()
	}()
	filled, done, err := f.inner.FillBatch(ctx, n)
	if err == nil && !done {
		f.rows.Add(filled)
		f.batches.Add(1)
	}
	if err == nil && done {
		f.closeOnce.Do(func() {
			f.caughtAt.Store(time.Now().UnixNano())
			close(f.caughtUp)
		})
	}
	return filled, done, err
}

// hold stops the fill once the batch under way, if any, is done.
func (f *countingFiller) hold(ctx context.Context) error {
	f.mu.Lock()
	f.held = true
	f.mu.Unlock()
	for range 6000 { // 30 s of 5 ms: far longer than any batch
		f.mu.Lock()
		busy := f.busy
		f.mu.Unlock()
		if !busy {
			return nil
		}
		if err := memory.Sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("a re-embed batch ran for over 30s")
}

// release lets the fill go on.
func (f *countingFiller) release() {
	f.mu.Lock()
	f.held = false
	f.mu.Unlock()
}

// onFor is the part of [t0, t1] before the fill caught up.
func (f *countingFiller) onFor(t0, t1 time.Time) time.Duration {
	if at := f.caughtAt.Load(); at > 0 && time.Unix(0, at).Before(t1) {
		t1 = time.Unix(0, at)
	}
	return max(0, t1.Sub(t0))
}

// fill is what was filled over took.
func (f *countingFiller) fill(took time.Duration) ReembedFill {
	r := ReembedFill{Rows: f.rows.Load(), Batches: f.batches.Load(), Sec: round3(took.Seconds())}
	if took > 0 {
		r.RowsSec = round3(float64(r.Rows) / took.Seconds())
	}
	return r
}

// perThousand is c per 1,000 rows.
func perThousand(c cpuTotals, rows int64) ReembedCPU {
	if rows <= 0 {
		return ReembedCPU{}
	}
	k := float64(rows) / 1000
	return ReembedCPU{DatabaseSec: round3((c.coordinator + c.workers) / k), HarnessSec: round3(c.harness / k), ServiceSec: round3(c.service / k)}
}

// netOfLoad is during less the load's own CPU: alone's per operation times
// the operations during (clamped at 0: an estimate on a shared machine).
func netOfLoad(during, alone cpuTotals, aloneOps, duringOps int) cpuTotals {
	if aloneOps <= 0 {
		return during
	}
	f := float64(duringOps) / float64(aloneOps)
	sub := func(a, b float64) float64 { return max(0, a-b*f) }
	return cpuTotals{service: sub(during.service, alone.service), coordinator: sub(during.coordinator+during.workers, alone.coordinator+alone.workers),
		harness: sub(during.harness, alone.harness)}
}
