package tenant

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// watchdogServer answers the lock watchdog's statements as a server a
// tenant runs that ignores rolesSQL's bounds: one honest marked role and
// hostile ones whose markers are hostileMarker bytes long.
func watchdogServer(t *testing.T, hostile, hostileMarker int) string {
	pad := strings.Repeat("z", hostileMarker)
	roles := func(emit func(...string) bool) {
		emit("16399", "engram_ok_login", "5", "managed-by=engram;uid=u0;runtime=team-a/ok")
		for i := range hostile {
			emit(fmt.Sprint(16400+i), fmt.Sprintf("engram_%d_login", i), "5",
				fmt.Sprintf("managed-by=engram;uid=u%d;runtime=team-a/mem;pad=%s", i+1, pad))
		}
	}
	return fakePG(t, func(q string) fakeAnswer {
		a, _ := watchdogAnswer(q, roles)
		return a
	})
}

// retainedHeap is the heap in use after two collections: the second frees
// what sync.Pool (pgx's buffer pool) kept through the first.
func retainedHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestWatchdogKeepsBoundedRolesPerNode: a server a tenant runs that ignores
// rolesSQL's LIMIT and length test makes each node's watchdog keep nothing
// of its oversized markers between looks (issue 26's eighth review,
// HIGH 1 c: 16 nodes of one server kept 540 MiB, 36 MiB each). What a
// watchdog keeps past its roles is one read buffer of pgx's, which the
// decoded values of the last DataRow of the connection point into: sized
// by the largest message of that answer, so at most MaxServerMessage.
func TestWatchdogKeepsBoundedRolesPerNode(t *testing.T) {
	url := watchdogServer(t, 4, 7<<20) // 4 × 7 MiB: 28 MiB, under MaxServerAnswer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := retainedHeap()
	const nodes = 16
	var dogs []*LockWatchdog
	defer func() {
		for _, d := range dogs {
			_ = d.Close(context.Background())
		}
	}()
	for k := range nodes { // one per node key: engram_k on the same server
		cfg := mustParseConfig(t, strings.Replace(url, "/engram?", fmt.Sprintf("/engram_%d?", k), 1))
		d, err := OpenLockWatchdog(ctx, cfg, LockPolicy{})
		if err != nil {
			t.Fatalf("watchdog %d: %v", k, err)
		}
		dogs = append(dogs, d)
		if _, err := d.Look(ctx); err != nil {
			t.Fatalf("look %d: %v", k, err)
		}
		if len(d.roles) != 1 || d.roles[16399].name != "engram_ok_login" {
			t.Errorf("watchdog %d watches %d roles, want only the honest one (engram_ok_login): %v", k, len(d.roles), d.oids(d.roles))
		}
	}
	var grew uint64
	if h := retainedHeap(); h > base {
		grew = h - base
	}
	perNode := grew / nodes
	t.Logf("%d watchdogs on one hostile server: retained heap grew %d MiB (%d MiB per node)", nodes, grew>>20, perNode>>20)
	// One read buffer is at most MaxServerMessage; twice that leaves room
	// for what the rest of the test binary allocates meanwhile (before
	// the fix: 31 to 36 MiB a node).
	if limit := uint64(2 * MaxServerMessage); perNode > limit {
		t.Errorf("each node's watchdog keeps %d MiB between looks, want at most %d MiB (one read buffer of pgx's: MaxServerMessage, with room)", perNode>>20, limit>>20)
	}
}

// manyRolesServer lists n honest marked roles, whatever the statement's
// LIMIT says.
func manyRolesServer(t *testing.T, n int) string {
	roles := func(emit func(...string) bool) {
		for i := range n {
			if !emit(fmt.Sprint(20000+i), fmt.Sprintf("engram_%d_login", i), "5",
				fmt.Sprintf("managed-by=engram;uid=u%d;runtime=team-a/m%d", i, i)) {
				return
			}
		}
	}
	return fakePG(t, func(q string) fakeAnswer {
		if a, ok := watchdogAnswer(q, roles); ok {
			return a
		}
		return fakeAnswer{cols: locksCols}
	})
}

// watchdogKeeps opens a watchdog with p on a server listing listed roles
// and checks it keeps the first want.
func watchdogKeeps(t *testing.T, p LockPolicy, listed, want int) {
	t.Helper()
	cfg := mustParseConfig(t, manyRolesServer(t, listed))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := mustOpenWatchdog(t, ctx, cfg, p)
	if len(d.roles) != want {
		t.Errorf("the watchdog keeps %d roles of a server that listed %d, want %d", len(d.roles), listed, want)
	}
	if _, ok := d.roles[uint32(20000+want)]; ok {
		t.Errorf("the watchdog keeps role %d, past the first %d", 20000+want, want)
	}
}

// TestWatchdogReadsAtMostMaxWatchedRoles: past maxWatchedRoles rows the
// watchdog stops reading roles, whatever the server's LIMIT did.
func TestWatchdogReadsAtMostMaxWatchedRoles(t *testing.T) {
	watchdogKeeps(t, LockPolicy{}, maxWatchedRoles+500, maxWatchedRoles)
}

// TestTenantRunWatchdogKeepsANamespaceOfRoles (issue 26, what stays per
// node): the watchdog of a node a tenant runs kept up to 10,000 roles
// (about 10 MiB) between looks; its honest roles are its namespace's
// runtimes, so it keeps at most MaxTenantWatchedRoles (1,000).
func TestTenantRunWatchdogKeepsANamespaceOfRoles(t *testing.T) {
	watchdogKeeps(t, LockPolicy{MaxRoles: MaxTenantWatchedRoles}, maxWatchedRoles+500, MaxTenantWatchedRoles)
}
