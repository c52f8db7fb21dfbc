package tenant

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a tenant-run server can make the operator keep, by what the caps
// count (docs/security.md, "What a tenant-run server can make the
// operator keep"), beyond fresh connections (pgx's own, about 28 KiB
// each on a real server, which the table adds).
const (
	// tenantNodeKeeps: a tenant-run node of the node runners, a watchdog
	// connection keeping MaxTenantWatchedRoles roles of the longest
	// names and markers, and a reaper connection, both at every bound.
	tenantNodeKeeps = 5 << 19 // 2.5 MiB
	// tenantPoolKeeps: an admin pool of a tenant's Secret, 4 idle
	// connections at every bound.
	tenantPoolKeeps = 4 * tenantConnKeeps
)

// worstTenantServer is a server a tenant runs driven to every bound the
// operator sets: the longest marked roles the watchdog keeps, more than
// it keeps; a row just under MaxTenantServerMessage for "big"; every
// other statement described with columns padded to tenantSmallMessage.
func worstTenantServer(t *testing.T) string {
	var cols []fakeCol
	for i := range 41 { // 41 × (80 + 19) bytes: just under tenantSmallMessage of row description
		cols = append(cols, fakeCol{fmt.Sprintf("c%02d%s", i, strings.Repeat("p", 77)), 25})
	}
	roles := func(emit func(...string) bool) {
		for i := range 2 * MaxTenantWatchedRoles {
			name := fmt.Sprintf("r%05d%s", i, strings.Repeat("n", maxRoleNameBytes-6))
			marker := fmt.Sprintf("managed-by=engram;uid=u%05d;runtime=ns-%05d/rt-%05d;pad=", i, i, i)
			if !emit(fmt.Sprint(20000+i), name, "5", marker+strings.Repeat("z", maxMarkerBytes-len(marker))) {
				return
			}
		}
	}
	return fakePG(t, func(q string) fakeAnswer {
		if a, ok := watchdogAnswer(q, roles); ok {
			return a
		}
		if strings.Contains(q, "big") {
			return fakeAnswer{cols: cols[:1], rows: func(emit func(...string) bool) { emit(strings.Repeat("x", MaxTenantServerMessage-1<<10)) }}
		}
		return fakeAnswer{cols: cols, rows: func(emit func(...string) bool) { emit(make([]string, len(cols))...) }}
	})
}

// driveToBounds fills conn's statement cache with padded descriptions and
// leaves the largest message it reads as its last.
func driveToBounds(t *testing.T, ctx context.Context, conn *pgx.Conn) {
	t.Helper()
	for i := range 2 * TenantStatementCache {
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT %d", i))
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("statement %d: %v", i, err)
		}
	}
	var s string
	if err := conn.QueryRow(ctx, "SELECT big").Scan(&s); err != nil {
		t.Fatalf("a row just under MaxTenantServerMessage: %v", err)
	}
}

// TestTenantRunWorstCaseFitsTheTable (issue 26, the worst case under the
// operator's memory limit): the worst case the caps allow, at reduced
// scale (4 nodes, 4 pools of 4 connections), keeps per node and per pool
// at most the figures docs/security.md's table multiplies by the caps.
// Before, a tenant-run node kept up to 28 MiB (10,000 roles and 8 MiB
// read buffers) and a pooled connection up to 8 MiB.
func TestTenantRunWorstCaseFitsTheTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	url := worstTenantServer(t)
	const nodes, pools, poolConns = 4, 4, 4
	var watch, reap [nodes]*pgx.Conn
	for i := range nodes {
		watch[i], reap[i] = tenantServerConn(t, ctx, url), tenantServerConn(t, ctx, url)
	}
	var pooled [pools * poolConns]*pgx.Conn
	for i := range pooled {
		pooled[i] = tenantServerConn(t, ctx, url)
	}
	base := retainedHeap() // fresh connections (and the fake server's buffers)

	var dogs []*LockWatchdog
	for i := range nodes {
		d, err := NewLockWatchdog(ctx, watch[i], LockPolicy{MaxRoles: MaxTenantWatchedRoles})
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if _, err := d.Look(ctx); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if len(d.roles) != MaxTenantWatchedRoles {
			t.Fatalf("node %d keeps %d roles, want %d", i, len(d.roles), MaxTenantWatchedRoles)
		}
		dogs = append(dogs, d)
		driveToBounds(t, ctx, watch[i])
		driveToBounds(t, ctx, reap[i])
	}
	afterNodes := retainedHeap()
	for _, c := range pooled {
		driveToBounds(t, ctx, c)
	}
	afterPools := retainedHeap()

	perNode := (afterNodes - min(base, afterNodes)) / nodes
	perPool := (afterPools - min(afterNodes, afterPools)) / pools
	t.Logf("a tenant-run node at its bounds keeps %d KiB, a pool of %d connections %d KiB (beyond fresh connections)", perNode>>10, poolConns, perPool>>10)
	if perNode > tenantNodeKeeps {
		t.Errorf("a tenant-run node keeps %d KiB, want at most %d KiB", perNode>>10, tenantNodeKeeps>>10)
	}
	if perPool > tenantPoolKeeps {
		t.Errorf("a pool of a tenant's Secret keeps %d KiB, want at most %d KiB", perPool>>10, tenantPoolKeeps>>10)
	}
	runtime.KeepAlive(dogs)
}
