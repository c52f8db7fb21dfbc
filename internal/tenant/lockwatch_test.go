package tenant

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestLockWatchdogEndsASavepointFlood: one connection of tenant A's login
// role, one message of nested savepoints that each write a row, fills the
// server's shared lock table (each open subtransaction keeps a lock on its
// transaction id); every other session and new connection then fails with
// "out of shared memory", for as long as A's session lives (issue 26's
// third review). The watchdog, opened before the attack, ends A's session
// while the table is full, and tenant B's query succeeds within a
// generous bound. The flood runs on a throw-away instance only, never on
// the shared test server.
func TestLockWatchdogEndsASavepointFlood(t *testing.T) {
	ctx := testCtx(t)
	in := testenv.NewInstance(t, "tenant-lockwatch")
	in.Start(t)
	url := in.NewDatabase(t)
	pool := testenv.NewPool(t, url, 2)
	resA := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_lockwatch_a"), 3))
	resB := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_lockwatch_b"), 3))
	cfg := mustParseConfig(t, url)
	w := mustOpenWatchdog(t, ctx, cfg, LockPolicy{})
	if hogs, err := w.Look(ctx); err != nil || len(hogs) > 0 {
		t.Fatalf("a look before the attack: %v, %v; want nothing found", hogs, err)
	}

	connA := loginConn(t, url, resA, resA.Password)
	var flood strings.Builder
	flood.WriteString("BEGIN;")
	for i := range 40000 {
		fmt.Fprintf(&flood, " SAVEPOINT s%d; INSERT INTO owner_locks VALUES ('x-%d');", i, i)
	}
	_, err := connA.Exec(ctx, flood.String())
	if err == nil || !strings.Contains(err.Error(), "out of shared memory") {
		t.Fatalf("A's savepoint flood ended with %v; want it to fill the lock table (out of shared memory)", err)
	}
	// The table is full now: B cannot even connect.
	if _, err := queryAs(ctx, url, resB); err == nil || !strings.Contains(err.Error(), "out of shared memory") {
		t.Fatalf("B's query while A fills the lock table: %v; want out of shared memory (the attack did not fill it)", err)
	}

	hogs, err := w.Look(ctx)
	if err != nil {
		t.Fatalf("the watchdog's look while the lock table is full: %v", err)
	}
	if len(hogs) != 1 || !hogs[0].Ended || hogs[0].PID != int(connA.PgConn().PID()) || hogs[0].Role != resA.LoginRole ||
		hogs[0].Tenant.UID != "uid-"+resA.Schema || hogs[0].Locks <= w.Threshold() {
		t.Fatalf("the watchdog found %+v; want A's session (pid %d, role %s) ended", hogs, connA.PgConn().PID(), resA.LoginRole)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := queryAs(ctx, url, resB)
		if err == nil {
			t.Logf("B's query succeeded after A's session was ended (%d memories); A held %d locks", n, hogs[0].Locks)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's query 30 s after the watchdog ended A: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := connA.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("A's session still answers after the watchdog ended it")
	}
}

// queryAs logs in as the login role of res and counts its memories.
func queryAs(ctx context.Context, url string, res *Result) (int, error) {
	conn, err := pgx.Connect(ctx, testenv.WithUser(url, res.LoginRole, res.Password))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM memories").Scan(&n)
	return n, err
}
