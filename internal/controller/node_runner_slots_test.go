package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-dev/engram/internal/testenv"
)

// countingJob counts the looks in flight at once, by kind of node; each
// look lasts hold.
type countingJob struct {
	hold time.Duration

	mu                     sync.Mutex
	tenant, platform       int
	maxTenant, maxPlatform int
	looks                  int
}

func (j *countingJob) open(context.Context, node, *pgx.Conn) error { return nil }
func (j *countingJob) forget(string)                               {}

func (j *countingJob) look(ctx context.Context, n node, _ *pgx.Conn) error {
	j.mu.Lock()
	if n.tenantRun() {
		j.tenant++
		j.maxTenant = max(j.maxTenant, j.tenant)
	} else {
		j.platform++
		j.maxPlatform = max(j.maxPlatform, j.platform)
	}
	j.mu.Unlock()
	time.Sleep(j.hold)
	j.mu.Lock()
	if n.tenantRun() {
		j.tenant--
	} else {
		j.platform--
	}
	j.looks++
	j.mu.Unlock()
	return nil
}

// TestTenantLooksAtOnceAreBounded (issue 26's tenth review, HIGH 1): each
// node had a goroutine of its own and nothing bounded the looks in flight,
// so 16 reaper looks at once on hostile tenant-run servers held 16 answers
// at a time (past 900 MiB). Now at most maxTenantLooksAtOnce looks at
// tenant-run nodes run at once, whatever their number, and the platform's
// nodes are not held back by them.
func TestTenantLooksAtOnceAreBounded(t *testing.T) {
	job := &countingJob{hold: 50 * time.Millisecond}
	looks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_looks_total"}, []string{"outcome"})
	r := newNodeRunner("engram-test-slots", nil, 10*time.Second, job, looks, logr.Discard())
	var nodes []*nodeState
	for i := range MaxTenantNodes {
		nodes = append(nodes, &nodeState{n: node{key: fmt.Sprintf("engram@tenant-%d:5432/db", i)}, conn: &nodeConn{}})
	}
	for i := range 4 { // the platform's Citus workers
		w := fmt.Sprintf("worker-%d:5432", i)
		nodes = append(nodes, &nodeState{n: node{key: "engram@platform:5432/db worker " + w, worker: w}, conn: &nodeConn{}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, st := range nodes {
		wg.Go(func() { r.lookKey(ctx, st) })
	}
	wg.Wait()
	t.Logf("%d tenant-run and 4 platform nodes: at most %d tenant looks and %d platform looks at once, %d looks in all",
		MaxTenantNodes, job.maxTenant, job.maxPlatform, job.looks)
	if job.maxTenant > maxTenantLooksAtOnce {
		t.Errorf("%d looks at tenant-run nodes ran at once; want at most %d", job.maxTenant, maxTenantLooksAtOnce)
	}
	if job.looks != len(nodes) {
		t.Errorf("%d of %d nodes were looked at; want all (the slots free long before the interval)", job.looks, len(nodes))
	}
	if job.maxPlatform != 4 {
		t.Errorf("at most %d of the 4 platform nodes were looked at at once; want 4: the tenant slots hold none of them back", job.maxPlatform)
	}
}

// stuckOpenJob's open waits until its context ends, as the lock watchdog's
// first reads do on a tenant-run server that never answers them.
type stuckOpenJob struct{ countingJob }

func (j *stuckOpenJob) open(ctx context.Context, _ node, _ *pgx.Conn) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestNodeOpenIsBounded (issue 26's thirteenth review, L2): opening a
// node ran the job's first reads on the runner's own context, which ends
// only when the node is released, so a server that never answered them
// held the node's goroutine that long. Now the open gives up within two
// connect timeouts and the node is tried again at the next round.
func TestNodeOpenIsBounded(t *testing.T) {
	url := testenv.AdminURL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	looks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_open_looks_total"}, []string{"outcome"})
	r := newNodeRunner("engram-test-open", nil, time.Second, &stuckOpenJob{}, looks, logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = r.open(ctx, node{key: "admin@" + cfg.Host}, []*pgx.ConnConfig{cfg})
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("open of a node whose first reads never end: %v after %s; want its own deadline, long before the runner's", err, time.Since(start))
	}
}
