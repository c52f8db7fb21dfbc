package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// citusTenantRole makes a login role on the Citus cluster of url that the
// reaper and the watchdog take for a tenant's (Engram's marker with a UID,
// no runtime: no event is looked for), and drops it at the end. Citus
// creates it, its password and its comment on every worker.
func citusTenantRole(t *testing.T, url string) (role, password string) {
	t.Helper()
	admin := testenv.NewPool(t, url, 2)
	role, password, id := markedLoginRole(t, admin, "engram_nodes_")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, u := range append(testenv.CitusWorkerURLs(t, url), url) {
			if conn, err := pgx.Connect(ctx, u); err == nil {
				_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
				_ = conn.Close(ctx)
			}
		}
		if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+id); err != nil {
			t.Logf("dropping role %s: %v", role, err)
		}
	})
	return role, password
}

// markedLoginRole creates, through admin, a login role named prefix and a
// random suffix that the reaper and the watchdog take for a tenant's
// (Engram's marker with a UID, no runtime); it returns the role, its
// password and its quoted name.
func markedLoginRole(t *testing.T, admin *pgxpool.Pool, prefix string) (role, password, id string) {
	t.Helper()
	role, password = prefix+randomSuffix(), "pw-"+randomSuffix()
	id = pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", id, password),
		fmt.Sprintf("COMMENT ON ROLE %s IS 'managed-by=engram; uid=uid-%s'", id, role),
	} {
		if _, err := admin.Exec(testContext(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return role, password, id
}

// onEveryWorker logs in as role on each worker of url directly (as a
// tenant may) and runs stmts there; the sessions stay open.
func onEveryWorker(t *testing.T, url, role, password string, stmts ...string) []*pgx.Conn {
	t.Helper()
	var conns []*pgx.Conn
	for _, w := range testenv.CitusWorkerURLs(t, url) {
		conn, err := pgx.Connect(testContext(t), testenv.WithUser(w, role, password))
		if err != nil {
			t.Fatalf("logging in on worker %s as %s: %v", testenv.HostPort(w), role, err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		for _, s := range stmts {
			if _, err := conn.Exec(testContext(t), s); err != nil {
				t.Fatalf("on worker %s: %s: %v", testenv.HostPort(w), s, err)
			}
		}
		conns = append(conns, conn)
	}
	return conns
}

// runUntilEnded runs rounds of r (bounded in count) until every session of
// conns is gone.
func runUntilEnded(t *testing.T, r *nodeRunner, conns []*pgx.Conn) {
	t.Helper()
	for range 40 {
		r.round(testContext(t))
		alive := 0
		for _, c := range conns {
			if _, err := c.Exec(testContext(t), "SELECT 1"); err == nil {
				alive++
			}
		}
		if alive == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("a session of the tenant on a Citus worker is still alive after 40 rounds of the %s", r.name)
}

// TestCitusWorkersReaped: a tenant's login role logs in on each Citus
// worker directly and holds a snapshot there, which holds back the
// cleanup of every tenant's tables on that worker. The transaction reaper,
// given only the coordinator's connection, ends those sessions.
func TestCitusWorkersReaped(t *testing.T) {
	url := testenv.NewCitusDatabase(t)
	role, password := citusTenantRole(t, url)
	held := onEveryWorker(t, url, role, password,
		"BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM pg_class")

	pools := newPoolCache(Options{}.withDefaults())
	t.Cleanup(func() { closePools(pools) })
	if _, err := pools.get("cluster/citus", url); err != nil {
		t.Fatal(err)
	}
	pools.prove("cluster/citus")
	o := Options{TenantBlockerMaxAge: 100 * time.Millisecond, TenantReaperInterval: time.Second}.withDefaults()
	reaper := newTransactionReaper(nil, pools, nil, o)
	t.Cleanup(reaper.closeAll)
	runUntilEnded(t, reaper.nodeRunner, held)
	if got, want := len(reaper.workers), 1; got != want {
		t.Errorf("the reaper knows the workers of %d database(s), want %d", got, want)
	}
}

// TestCitusWorkersLockWatched: a tenant's session on a Citus worker,
// logged in directly, takes more locks than the threshold (a handful of
// savepoints that write: low threshold, nothing near the worker's lock
// table, which the other tests share). The lock watchdog, given only the
// coordinator's connection, ends it: each worker has a lock table of its
// own.
func TestCitusWorkersLockWatched(t *testing.T) {
	url := testenv.NewCitusDatabase(t)
	role, password := citusTenantRole(t, url)
	var savepoints strings.Builder
	savepoints.WriteString("BEGIN; CREATE TEMP TABLE held (x int);")
	for i := range 30 {
		fmt.Fprintf(&savepoints, " SAVEPOINT s%d; INSERT INTO held VALUES (%d);", i, i)
	}
	pools := newPoolCache(Options{}.withDefaults())
	t.Cleanup(func() { closePools(pools) })
	if _, err := pools.get("cluster/citus", url); err != nil {
		t.Fatal(err)
	}
	pools.prove("cluster/citus")
	o := Options{TenantLockThreshold: 20, TenantLockWatchInterval: time.Second}.withDefaults()
	dog := newLockWatchdog(nil, pools, nil, o)
	t.Cleanup(dog.closeAll)
	// Two rounds before the tenant acts: the coordinator's, which finds
	// the workers, and the workers', which open their connections.
	dog.round(testContext(t))
	dog.round(testContext(t))
	hogs := onEveryWorker(t, url, role, password, savepoints.String())
	runUntilEnded(t, dog.nodeRunner, hogs)
}

// closePools closes the pools of a poolCache a test made.
func closePools(c *poolCache) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Start(ctx)
}
