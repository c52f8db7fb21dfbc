package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/engram-dev/engram/internal/testenv"
)

// panickyJob panics at the first look of the node panicKey, and counts
// every look that returned, by node.
type panickyJob struct {
	panicKey string

	mu       sync.Mutex
	panicked bool
	looks    map[string]int
}

func (j *panickyJob) open(context.Context, node, *pgx.Conn) error { return nil }
func (j *panickyJob) forget(string)                               {}

func (j *panickyJob) look(ctx context.Context, n node, conn *pgx.Conn) error {
	j.mu.Lock()
	boom := n.key == j.panicKey && !j.panicked
	j.panicked = j.panicked || boom
	j.mu.Unlock()
	if boom {
		panic("negative shift amount") // what a forged marker did
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		return err
	}
	j.mu.Lock()
	j.looks[n.key]++
	j.mu.Unlock()
	return nil
}

func (j *panickyJob) count(key string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.looks[key]
}

// TestNodeRunnerSurvivesAPanickingLook (issue 26's sixth review,
// MEDIUM 1): a look that panics (a forged quarantine marker on a server a
// tenant runs made the lock watchdog shift by a negative amount) ran in a
// node's goroutine with nothing to recover, and the operator exited. Now
// the panic is a failed look: the runner keeps running, the other node is
// looked at all along, and the node that panicked is looked at again after
// its pause.
func TestNodeRunnerSurvivesAPanickingLook(t *testing.T) {
	pools := newPoolCache(Options{}.withDefaults())
	t.Cleanup(func() { closePools(pools) })
	for _, id := range []string{"database/hostile", "database/other"} {
		if _, err := pools.get(id, testenv.NewDatabase(t)); err != nil {
			t.Fatal(err)
		}
		pools.prove(id)
	}
	keyOf := func(id string) string {
		return pools.peek(id).Config().ConnConfig.User + "@" + pools.address(id)
	}
	hostile, other := keyOf("database/hostile"), keyOf("database/other")
	job := &panickyJob{panicKey: hostile, looks: map[string]int{}}
	looks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_looks_total"}, []string{"outcome"})
	const interval = 100 * time.Millisecond
	r := newNodeRunner("engram-test-panic", pools, interval, job, looks, logr.Discard())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	defer func() { cancel(); <-done }()
	// The pause after one failure is two intervals: well inside 20 s.
	for deadline := time.Now().Add(20 * time.Second); job.count(hostile) == 0 || job.count(other) < 5; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the runner stopped after the panic: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 20 s: %d look(s) of the node that panicked after its pause, %d of the other; want ≥ 1 and ≥ 5", job.count(hostile), job.count(other))
		}
	}
	if got := testutil.ToFloat64(looks.WithLabelValues("error")); got < 1 {
		t.Errorf("looks with outcome error = %v; want the panic counted", got)
	}
}
