package controller

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/engram-dev/engram/internal/tenant"
)

// TestLockWatchdogFailureLogIsBounded (issue 26, eleventh review, HIGH 1):
// the failure log kept a copy of the node key per pid the server named,
// for a minute, and scanned all of it at every call. A tenant-run server
// naming 1,000 unended roles with new pids at every look, behind 9,000-byte
// node keys, took the operator past its memory limit within 30 s, and 16
// nodes made one look's reports take seconds. Now each node keeps at most
// maxFailuresLoggedPerNode fixed-size entries, pruned once per look, and
// the rest of a look is one "and more" line. 16 nodes, 5 looks each.
func TestLockWatchdogFailureLogIsBounded(t *testing.T) {
	const nodes, roles, looks = 16, 1000, 5
	w := newLockWatchdog(nil, newPoolCache(Options{}.withDefaults()), nil, Options{}.withDefaults())
	w.log = logr.Discard()
	ctx := context.Background()
	before := heapAlloc()
	var wg sync.WaitGroup
	for i := range nodes {
		n := node{key: longNodeKey(i)}
		wg.Go(func() {
			for l := range looks {
				start := time.Now()
				w.failures.startLook(n.key, start)
				for r := range roles {
					w.report(ctx, n, tenant.LockHog{PID: (i*looks+l)*roles + r + 1, Role: "r", Problem: "pg_terminate_backend found no such session"})
				}
				// new pids at every look: the first fills the node's room, the
				// rest go to the summary line only
				want := roles
				if l == 0 {
					want = roles - maxFailuresLoggedPerNode
				}
				if more := w.failures.endLook(n.key); more != want {
					t.Errorf("node %d's look %d left %d failures for its summary line, want %d", i, l, more, want)
				}
			}
		})
	}
	wg.Wait()
	// one more look of one node, alone, timed: CPU per look, not how 16
	// goroutines share 2 cores
	n := node{key: longNodeKey(0)}
	start := time.Now()
	w.failures.startLook(n.key, start)
	for r := range roles {
		w.report(ctx, n, tenant.LockHog{PID: -r - 1, Role: "r", Problem: "pg_terminate_backend found no such session"})
	}
	w.failures.endLook(n.key)
	worst := time.Since(start)
	grew := int64(heapAlloc()) - int64(before)
	kept := w.failures.size()
	t.Logf("%d nodes with 9,000-byte keys, %d looks of %d failed roles each: %d sessions kept, heap grew %d KiB, one look's reports alone took %s",
		nodes, looks, roles, kept, grew>>10, worst.Round(time.Microsecond))
	if kept > nodes*maxFailuresLoggedPerNode {
		t.Errorf("%d sessions kept, want at most %d (%d a node)", kept, nodes*maxFailuresLoggedPerNode, maxFailuresLoggedPerNode)
	}
	if grew > 8<<20 {
		t.Errorf("the heap grew %d KiB, want under 8 MiB", grew>>10)
	}
	if worst > 500*time.Millisecond {
		t.Errorf("one look's reports took %s, want well under the 1 s interval", worst)
	}
	for i := range nodes {
		w.forget(longNodeKey(i))
	}
	if kept := w.failures.size(); kept != 0 {
		t.Errorf("%d sessions kept after every node was forgotten, want 0", kept)
	}
}

// longNodeKey is node i's key with a 4,500-byte user and database, about
// what a real PostgreSQL's startup packet takes.
func longNodeKey(i int) string {
	return fmt.Sprintf("%s@tenant-%d.example:5432/%s", strings.Repeat("u", 4500), i, strings.Repeat("d", 4500))
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
