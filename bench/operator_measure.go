package main

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// connSampler reads, every interval, how many sessions the operator's
// database has (pg_stat_activity), and keeps the peak: the connections
// the operator used while it provisioned.
type connSampler struct {
	mu   sync.Mutex
	peak int
	stop context.CancelFunc
	done chan struct{}
}

// sampleConnections starts a connSampler on database db of serverURL. A
// failure to connect or read is not the operator's: the peak stays -1.
func sampleConnections(ctx context.Context, serverURL, db string, interval time.Duration) *connSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &connSampler{peak: -1, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			var n int
			// Not this sampler's own session: it is on another database.
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, db).Scan(&n); err == nil {
				s.mu.Lock()
				s.peak = max(s.peak, n)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns the peak (-1: never read).
func (s *connSampler) finish() int {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// histogram sums the sample sum and count of histogram name over the
// series that match.
func (s scrape) histogram(name string, match func(map[string]string) bool) (sum float64, count uint64) {
	fam, ok := s[name]
	if !ok {
		return 0, 0
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if h := m.GetHistogram(); h != nil && (match == nil || match(labels)) {
			sum += h.GetSampleSum()
			count += h.GetSampleCount()
		}
	}
	return sum, count
}

// provisionings reads the operator's successful provisionings and their
// mean time in PostgreSQL (engram_operator_provision_duration_seconds).
func provisionings(s scrape) (n int, meanMs float64) {
	sum, count := s.histogram("engram_operator_provision_duration_seconds", func(l map[string]string) bool { return l["result"] == "ok" })
	if count == 0 {
		return 0, 0
	}
	return int(count), round3(sum / float64(count) * 1000)
}
