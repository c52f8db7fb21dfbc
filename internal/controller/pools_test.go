package controller

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestAdminSessionsHaveTimeouts: every session of an admin pool carries
// lock_timeout and statement_timeout, so a lock a tenant holds or a slow
// statement cannot stall a reconcile for longer, and commits
// synchronously even when the server's default (here the URL's) is off:
// a crash must not take back a provisioning pass the operator reported.
func TestAdminSessionsHaveTimeouts(t *testing.T) {
	u, err := url.Parse(testenv.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	c := newPoolCache(Options{LockTimeout: 3 * time.Second, DatabaseTimeout: 45 * time.Second}.withDefaults())
	// A platform connection: a tenant's URL may not set synchronous_commit.
	pool, err := c.get("database/test", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lock, stmt, app, sync string
	if err := pool.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('application_name'),
		current_setting('synchronous_commit')`).Scan(&lock, &stmt, &app, &sync); err != nil {
		t.Fatal(err)
	}
	if lock != "3s" || stmt != "45s" || app != "engram-operator" || sync != "on" {
		t.Fatalf("admin session: lock_timeout=%s statement_timeout=%s application_name=%s synchronous_commit=%s; want 3s, 45s, engram-operator, on",
			lock, stmt, app, sync)
	}
}

// TestTenantPoolsPerNamespaceAreCapped (issue 26's ninth review, MEDIUM 1):
// every connection Secret has a pool of its own, and a namespace of many
// runtimes, each naming its own Secret, kept a pool and its idle
// connections open for each (each connection to a server the tenant runs
// may keep up to 8 MiB of read buffer). The operator keeps at most
// MaxTenantPoolsPerNamespace pools of one namespace, closing the least
// recently used; other namespaces' and the platform's pools stay.
func TestTenantPoolsPerNamespaceAreCapped(t *testing.T) {
	dbURL := testenv.AdminURL(t)
	c := newTestPoolCache(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func(id string) *pgxpool.Pool {
		pool, err := c.get(id, dbURL)
		if err != nil {
			t.Fatalf("pool %s: %v", id, err)
		}
		if err := pool.Ping(ctx); err != nil { // leaves an idle connection
			t.Fatalf("pool %s: %v", id, err)
		}
		return pool
	}
	platform := open("database/shared")
	other := open("secret/other/s/url")
	var pools []*pgxpool.Pool
	const secrets = 3 * MaxTenantPoolsPerNamespace
	for i := range secrets {
		pools = append(pools, open(fmt.Sprintf("secret/evil/s%d/url", i)))
	}
	var kept []string
	for id := range c.pools {
		if ns, _ := secretNamespace(id); ns == "evil" {
			kept = append(kept, id)
		}
	}
	if len(kept) != MaxTenantPoolsPerNamespace {
		t.Fatalf("%d Secrets of one namespace: %d pools open; want %d", secrets, len(kept), MaxTenantPoolsPerNamespace)
	}
	for i := secrets - MaxTenantPoolsPerNamespace; i < secrets; i++ {
		if c.peek(fmt.Sprintf("secret/evil/s%d/url", i)) != pools[i] {
			t.Fatalf("the pool of Secret s%d, among the newest, was closed", i)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range pools[:secrets-MaxTenantPoolsPerNamespace] {
		for p.Stat().TotalConns() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := p.Stat().TotalConns(); n > 0 {
			t.Fatalf("a pool over the cap still holds %d connections", n)
		}
	}
	if c.peek("database/shared") != platform || c.peek("secret/other/s/url") != other {
		t.Fatal("the platform's or another namespace's pool was closed")
	}
}

// TestTenantPoolsInAllAreCapped (issue 26, what stays per pool): the pools
// of tenants' Secrets were capped per namespace only, so every namespace
// whose passes ran within the idle time added its pools and their idle
// connections. At most MaxTenantPools are open in all; the least recently
// used idle ones are closed, a pool in use and the platform's never.
func TestTenantPoolsInAllAreCapped(t *testing.T) {
	dbURL := testenv.AdminURL(t)
	c := newTestPoolCache(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	get := func(id string) *pgxpool.Pool {
		pool, err := c.get(id, dbURL)
		if err != nil {
			t.Fatalf("pool %s: %v", id, err)
		}
		return pool
	}
	platform := get("database/shared")
	busy, err := get("secret/ns-busy/s/url").Acquire(ctx) // the oldest, and in use
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release()
	const namespaces = 2 * MaxTenantPools
	for i := range namespaces {
		get(fmt.Sprintf("secret/ns%d/s/url", i))
	}
	var open int
	for id := range c.pools {
		if _, ok := secretNamespace(id); ok {
			open++
		}
	}
	if open > MaxTenantPools {
		t.Fatalf("one Secret in each of %d namespaces: %d tenant pools open; want at most %d", namespaces, open, MaxTenantPools)
	}
	if c.peek("secret/ns-busy/s/url") == nil {
		t.Fatal("a pool with a connection in use was closed")
	}
	if c.peek(fmt.Sprintf("secret/ns%d/s/url", namespaces-1)) == nil || c.peek("secret/ns0/s/url") != nil {
		t.Fatal("the pools closed are not the least recently used")
	}
	if c.peek("database/shared") != platform {
		t.Fatal("the platform's pool was closed")
	}
}

// newTestPoolCache is the operator's pool cache with default options; the
// pools still open are closed when the test ends.
func newTestPoolCache(t *testing.T) *poolCache {
	c := newPoolCache(Options{}.withDefaults())
	t.Cleanup(func() {
		for _, p := range c.pools {
			p.pool.Close()
		}
	})
	return c
}
