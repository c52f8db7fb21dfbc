package controller

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// blackhole listens on 127.0.0.1, accepts every connection and never
// answers; it counts the connections.
func blackhole(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	return countingListener(t, true)
}

// countingListener listens on 127.0.0.1, accepts every connection, never
// answers and counts them; hold keeps each one open until the test ends
// (a server that hangs), else it is closed at once (one that hangs up).
func countingListener(t *testing.T, hold bool) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	held := make(chan net.Conn, 1024)
	t.Cleanup(func() {
		_ = ln.Close()
		close(held)
		for c := range held {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			if !hold {
				_ = c.Close()
				continue
			}
			select {
			case held <- c:
			default:
				_ = c.Close()
			}
		}
	}()
	return ln.Addr().String(), accepted
}

// plainTenantRole makes a login role on url's server that the watchdog
// takes for a tenant's (Engram's marker with a UID, no runtime: no event
// is looked for); the instance is
// thrown away with it.
func plainTenantRole(t *testing.T, url string) (role, password string) {
	t.Helper()
	role, password, _ = markedLoginRole(t, testenv.NewPool(t, url, 1), "engram_bh_")
	return role, password
}

// TestNodeRunnerBlackholeKeysDelayNoOne (issue 26's fourth review, HIGH 4):
// the watchdog looked at every database one after the other, opening each
// connection inside its 1 s round with a 10 s timeout, so a connection
// Secret naming an address that accepts and never answers stalled the
// watchdog of every database for 10 s a round. Now each database has a
// goroutine and a ticker of its own: with four such addresses (proven
// once, hanging now) beside a real database, a session over the threshold
// on the real one is ended within two intervals; a connection that never
// proved itself is not even tried.
func TestNodeRunnerBlackholeKeysDelayNoOne(t *testing.T) {
	in := testenv.NewInstance(t, "controller-blackhole")
	in.Start(t)
	url := in.NewDatabase(t)
	role, password := plainTenantRole(t, url)
	hung, hungAccepted := blackhole(t)
	never, neverAccepted := blackhole(t)

	pools := newPoolCache(Options{}.withDefaults())
	t.Cleanup(func() { closePools(pools) })
	if _, err := pools.get("database/shared", url); err != nil {
		t.Fatal(err)
	}
	pools.prove("database/shared")
	for i := range 4 {
		id := fmt.Sprintf("secret/team-a/hung-%d", i)
		if _, err := pools.get(id, fmt.Sprintf("postgres://engram:pw@%s/db%d?sslmode=disable", hung, i)); err != nil {
			t.Fatal(err)
		}
		pools.prove(id) // it answered once, and hangs now
	}
	if _, err := pools.get("secret/team-a/never", "postgres://engram:pw@"+never+"/engram?sslmode=disable"); err != nil {
		t.Fatal(err)
	}

	const interval = time.Second
	o := Options{TenantLockThreshold: 20, TenantLockWatchInterval: interval}.withDefaults()
	dog := newLockWatchdog(nil, pools, nil, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dog.Start(ctx) }()
	defer func() { cancel(); <-done }()
	good := "engram@" + pools.address("database/shared")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if dog.dogs.get(strings.Replace(good, "engram@", userOf(t, url)+"@", 1), nil) != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watchdog of the real database did not open within 30 s")
		}
	}

	conn, err := pgx.Connect(testContext(t), testenv.WithUser(url, role, password))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var flood strings.Builder
	flood.WriteString("BEGIN; CREATE TEMP TABLE held (x int);")
	for i := range 30 {
		fmt.Fprintf(&flood, " SAVEPOINT s%d; INSERT INTO held VALUES (%d);", i, i)
	}
	if _, err := conn.Exec(testContext(t), flood.String()); err != nil {
		t.Fatal(err)
	}
	held := time.Now()
	for {
		if _, err := conn.Exec(testContext(t), "SELECT 1"); err != nil {
			break
		}
		if time.Since(held) > 20*time.Second {
			t.Fatal("the hog is still alive after 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(held)
	t.Logf("the hog was ended %v after it took its locks (interval %v, 4 hanging databases); connections to the hanging one: %d, to the never proven one: %d",
		took.Round(time.Millisecond), interval, hungAccepted.Load(), neverAccepted.Load())
	if took > 2*interval {
		t.Errorf("the hog was ended after %v, more than two intervals (%v)", took, 2*interval)
	}
	if n := neverAccepted.Load(); n > 0 {
		t.Errorf("the watchdog opened %d connection(s) to a database no runtime ever proved", n)
	}
}

// userOf is the user of url.
func userOf(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.User
}

// TestPoolCacheForgetsIdlePools: a pool no reconcile asked for within the
// idle time (its runtime deleted, its Secret changed) is closed and no
// longer watched; a proven pool in use is.
func TestPoolCacheForgetsIdlePools(t *testing.T) {
	pools := newPoolCache(Options{}.withDefaults())
	t.Cleanup(func() { closePools(pools) })
	for _, id := range []string{"secret/a/gone", "secret/a/kept"} {
		if _, err := pools.get(id, "postgres://engram:pw@127.0.0.1:1/"+strings.ReplaceAll(id, "/", "-")); err != nil {
			t.Fatal(err)
		}
		pools.prove(id)
	}
	pools.mu.Lock()
	pools.pools["secret/a/gone"].usedAt = time.Now().Add(-pools.idle - time.Second)
	pools.mu.Unlock()
	dbs := pools.databases()
	if len(dbs) != 1 || pools.peek("secret/a/gone") != nil || pools.peek("secret/a/kept") == nil {
		t.Fatalf("after the idle time: %d database(s) watched, gone %v, kept %v; want only the kept one", len(dbs), pools.peek("secret/a/gone") != nil, pools.peek("secret/a/kept") != nil)
	}
}
