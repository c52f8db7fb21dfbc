package testenv

import (
	"runtime"
	"time"
)

// HeapPeak samples the heap every interval until stop is called, which
// returns the most it saw above the heap at the start (after a GC). The
// bound tests of a hostile server (internal/tenant, internal/controller)
// use it to show what one answer could make the process hold.
func HeapPeak(interval time.Duration) (stop func() uint64) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	base, peak := m.HeapAlloc, m.HeapAlloc
	done, out := make(chan struct{}), make(chan uint64)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				out <- peak - min(base, peak)
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-out }
}
