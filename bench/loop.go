package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// opFunc is one operation of a load run; worker is 0..concurrency-1.
type opFunc func(ctx context.Context, worker int) error

// maxErrorsPerRun stops a run that keeps failing: a broken run is reported
// with its first error instead of spinning until the deadline.
const maxErrorsPerRun = 100

// sample is what one run collected, before it is summarised.
type sample struct {
	latencies  []time.Duration
	errors     int
	elapsed    time.Duration
	firstError string
}

// runLoad runs op with conc workers until dur has passed or maxOps
// operations have started, whichever comes first: every loop is bounded in
// count and in time. At the deadline no new operation starts, but the ones
// in flight finish: cancelling them would cancel their queries, and pgx
// closes a connection whose query was cancelled, so every run would end by
// closing up to conc pooled connections and the next one would begin by
// opening (and authenticating) new ones — a cost the service does not pay in
// steady state, and one that grows with the concurrency (issue 17: the raw
// side at c=4 fell below c=1). ctx still cancels everything (a run that is
// interrupted, or one that keeps failing).
func runLoad(ctx context.Context, conc int, dur time.Duration, maxOps int, op opFunc) sample {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		started atomic.Int64
		mu      sync.Mutex
		out     sample
		wg      sync.WaitGroup
	)
	begin := time.Now()
	deadline := begin.Add(dur)
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			for ctx.Err() == nil && time.Now().Before(deadline) && started.Add(1) <= int64(maxOps) {
				t0 := time.Now()
				err := op(ctx, w)
				d := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil {
						break // interrupted: not a failure of the system
					}
					mu.Lock()
					out.errors++
					if out.firstError == "" {
						out.firstError = err.Error()
					}
					if out.errors > maxErrorsPerRun {
						cancel()
					}
					mu.Unlock()
					continue
				}
				local = append(local, d)
			}
			mu.Lock()
			out.latencies = append(out.latencies, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(begin)
	return out
}

// merge adds another run's samples (of the same workload) to s.
func (s *sample) merge(o sample) {
	s.latencies = append(s.latencies, o.latencies...)
	s.errors += o.errors
	s.elapsed += o.elapsed
	if s.firstError == "" {
		s.firstError = o.firstError
	}
}

// stats summarises s.
func (s sample) stats() RunStats {
	r := RunStats{Ops: len(s.latencies), Errors: s.errors, Elapsed: s.elapsed, FirstError: s.firstError}
	r.ElapsedSec = round3(s.elapsed.Seconds())
	if s.elapsed > 0 {
		r.Throughput = round3(float64(r.Ops) / s.elapsed.Seconds())
	}
	r.Latency = summarize(s.latencies)
	return r
}
