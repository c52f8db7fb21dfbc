package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// countingFiller stands between the Job's loop and the re-embed's Filler:
// it counts the rows and batches filled, closes caughtUp when a batch first
// finds no row left, and with a limit ends the loop the way a switch does
// (ErrReembedNotFilling) once that many rows are filled.
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
}

func newCountingFiller(limit int64) *countingFiller {
	return &countingFiller{limit: limit, caughtUp: make(chan struct{}), start: time.Now()}
}

func (f *countingFiller) FillBatch(ctx context.Context, n int) (int64, bool, error) {
	if f.limit > 0 && f.rows.Load() >= f.limit {
		return 0, false, memory.ErrReembedNotFilling
	}
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

// fill is what was filled over took.
func (f *countingFiller) fill(took time.Duration) ReembedFill {
	r := ReembedFill{Rows: f.rows.Load(), Batches: f.batches.Load(), Sec: round3(took.Seconds())}
	if took > 0 {
		r.RowsSec = round3(float64(r.Rows) / took.Seconds())
	}
	return r
}

// fillUntilCaughtUp is what was filled from t0 until no row was left.
func (f *countingFiller) fillUntilCaughtUp(t0 time.Time) ReembedFill {
	end := time.Now()
	if at := f.caughtAt.Load(); at > 0 {
		end = time.Unix(0, at)
	}
	return f.fill(end.Sub(t0))
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

func sleepCtxBench(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
