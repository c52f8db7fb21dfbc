package tenant

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// smallLockInstance starts the throw-away instance name with a small lock
// table (max_locks_per_transaction 16, max_connections 40: about 1,000
// entries, a 32-lock threshold), so a flood fills it in a fraction of a
// second with a handful of sessions. It returns a fresh database's URL.
// The settings stay in the instance's data directory, which only this
// test uses.
func smallLockInstance(t *testing.T, name string) string {
	t.Helper()
	in := testenv.NewInstance(t, name)
	admin := in.Start(t)
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	var locks, conns int
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_locks_per_transaction')::int, current_setting('max_connections')::int`).Scan(&locks, &conns); err != nil {
		t.Fatal(err)
	}
	if locks != 16 || conns != 40 {
		for _, s := range []string{"ALTER SYSTEM SET max_locks_per_transaction = 16", "ALTER SYSTEM SET max_connections = 40"} {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		_ = conn.Close(ctx)
		in.Stop(t)
		in.Start(t)
	} else {
		_ = conn.Close(ctx)
	}
	return in.NewDatabase(t)
}

// floodSQL opens a transaction of n nested savepoints that each write a
// row and leaves it open: n+1 locks on transaction ids.
func floodSQL(n int) string {
	var s strings.Builder
	s.WriteString("BEGIN;")
	for i := range n {
		fmt.Fprintf(&s, " SAVEPOINT s%d; INSERT INTO owner_locks VALUES ('q-%d-'||pg_backend_pid());", i, i)
	}
	return s.String()
}

// TestLockWatchdogQuarantinesAReconnectingFlood (issue 26's fourth review,
// HIGH 2): A's sessions fill the lock table in parallel between two looks,
// and when the watchdog ends them A reconnects and fills it again; two
// thirds of B's writes failed while the watchdog ran every second. Now the
// watchdog ends every session of A's role and refuses its logins for a
// back-off (CONNECTION LIMIT 0): after the first look that ends A, B's
// writes fail for at most one interval, A's logins are refused with "too
// many connections for role" until the back-off ends, and then A may log
// in again.
func TestLockWatchdogQuarantinesAReconnectingFlood(t *testing.T) {
	ctx := testCtx(t)
	url := smallLockInstance(t, "tenant-lockquar")
	pool := testenv.NewPool(t, url, 2)
	resA := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_quar_a"), 3))
	resB := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_quar_b"), 3))
	pool.Reset()
	cfg := mustParseConfig(t, url)
	const interval, backoff = time.Second, 4 * time.Second
	w := mustOpenWatchdog(t, ctx, cfg, LockPolicy{Quarantine: backoff})
	connB := loginConn(t, url, resB, resB.Password)

	// The attack runs until shortly before the back-off ends.
	actx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	var mu sync.Mutex
	var firstEnd time.Time
	var refusals []string // A's login errors after the first end
	var wg sync.WaitGroup
	for range min(resA.ConnectionLimit, 8) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attack(actx, url, resA, &mu, &firstEnd, &refusals)
		}()
	}
	wg.Add(1)
	go func() { // the operator's loop
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for actx.Err() == nil {
			select {
			case <-actx.Done():
				return
			case <-tick.C:
			}
			hogs, err := w.Look(ctx)
			if err != nil {
				t.Logf("look: %v", err)
			}
			for _, h := range hogs {
				if h.Ended && h.Role == resA.LoginRole {
					mu.Lock()
					if firstEnd.IsZero() {
						firstEnd = time.Now()
						t.Logf("the first look that ended A: %s, %d sessions, quarantine %v %s", h.Why, h.Sessions, h.Quarantine, h.QuarantineProblem)
						stop2 := time.AfterFunc(backoff-time.Second, stop)
						_ = stop2
					}
					mu.Unlock()
				}
			}
		}
	}()
	var ok, failBefore, failAfter int
	var sample string
	for actx.Err() == nil {
		_, err := connB.Exec(ctx, "INSERT INTO owner_locks VALUES ($1)", fmt.Sprint("b-", time.Now().UnixNano()))
		mu.Lock()
		after := !firstEnd.IsZero() && time.Since(firstEnd) > interval
		mu.Unlock()
		switch {
		case err == nil:
			ok++
		case after:
			failAfter++
			sample = err.Error()
		default:
			failBefore++
		}
		if err != nil && connB.IsClosed() {
			connB = loginConn(t, url, resB, resB.Password)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("B's writes: %d ok, %d failed before the first end (+1 interval), %d after; A's logins refused after it: %d", ok, failBefore, failAfter, len(refusals))
	if firstEnd.IsZero() {
		t.Fatal("the watchdog never ended A's sessions")
	}
	if failAfter > 0 {
		t.Errorf("%d of B's writes failed more than one interval after the watchdog first ended A (%s); want none during the back-off", failAfter, sample)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "too many connections for role") {
			t.Errorf("A's login during the back-off failed with %q; want \"too many connections for role\" (CONNECTION LIMIT 0)", r)
			break
		}
	}
	// The back-off ends: a look restores A's limit, and A logs in again.
	deadline := time.Now().Add(backoff + 5*time.Second)
	for {
		if _, err := w.Look(ctx); err != nil {
			t.Logf("look: %v", err)
		}
		if _, err := queryAs(ctx, url, resA); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("A's login %v after the back-off: %v; want it restored", backoff+5*time.Second, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// attack logs in as res, floods, holds until its session is ended, and
// again, until ctx ends. Login errors after firstEnd are recorded.
func attack(ctx context.Context, url string, res *Result, mu *sync.Mutex, firstEnd *time.Time, refusals *[]string) {
	stmt := floodSQL(400)
	for ctx.Err() == nil {
		c, err := pgx.Connect(ctx, testenv.WithUser(url, res.LoginRole, res.Password))
		if err != nil {
			mu.Lock()
			if !firstEnd.IsZero() && time.Since(*firstEnd) > 200*time.Millisecond && ctx.Err() == nil {
				*refusals = append(*refusals, err.Error())
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		_, _ = c.Exec(ctx, stmt)
		for ctx.Err() == nil {
			if _, err := c.Exec(ctx, "SELECT 1"); err != nil && !strings.Contains(err.Error(), "current transaction is aborted") {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = c.Close(context.Background())
	}
}

// TestLockWatchdogSumsANamespace (issue 26's fourth review, HIGH 3): the
// threshold was per session, and a namespace's sessions, each just under
// it, filled the table with nothing ever ended. Now the watchdog sums the
// locks of every session of the namespace's login roles: four runtimes of
// one namespace, two sessions each at the threshold, together over the
// namespace's share of the table, are all ended and quarantined; B's query
// succeeds.
func TestLockWatchdogSumsANamespace(t *testing.T) {
	ctx := testCtx(t)
	url := smallLockInstance(t, "tenant-locksum")
	pool := testenv.NewPool(t, url, 2)
	var team []*Result
	ns := "team-" + uniqueSchema(t, "x")
	for i := range 4 {
		s := newSpec(uniqueSchema(t, fmt.Sprintf("engram_sum_%d", i)), 3)
		s.Owner.Namespace = ns
		team = append(team, mustProvision(t, pool, url, s))
	}
	resB := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_sum_b"), 3))
	pool.Reset()
	cfg := mustParseConfig(t, url)
	w := mustOpenWatchdog(t, ctx, cfg, LockPolicy{})
	stmt := floodSQL(w.Threshold() - 1) // the threshold's count, not over it
	var conns []*pgx.Conn
	for _, r := range team {
		for range 2 {
			c := loginConn(t, url, r, r.Password)
			if _, err := c.Exec(ctx, stmt); err != nil {
				t.Fatalf("a session at the threshold: %v", err)
			}
			conns = append(conns, c)
		}
	}
	if held := len(conns) * w.Threshold(); held <= w.Budget() {
		t.Fatalf("the team holds %d locks, not over the budget of %d: the test is wrong", held, w.Budget())
	}
	hogs, err := w.Look(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hogs) != len(team) {
		t.Fatalf("the watchdog ended %+v; want the %d roles of namespace %s", hogs, len(team), ns)
	}
	for _, h := range hogs {
		if !h.Ended || h.Sessions != 2 || !strings.Contains(h.Why, "namespace "+ns) || h.Quarantine == 0 {
			t.Errorf("role %s: ended %v, %d sessions, quarantine %v (%s), why %q; want its 2 sessions ended for the namespace's sum, and a quarantine",
				h.Role, h.Ended, h.Sessions, h.Quarantine, h.QuarantineProblem, h.Why)
		}
	}
	for i, c := range conns {
		if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
			t.Errorf("session %d of the team still answers", i)
		}
	}
	if _, err := queryAs(ctx, url, team[0]); err == nil || !strings.Contains(err.Error(), "too many connections for role") {
		t.Errorf("a team role's login during the quarantine: %v; want \"too many connections for role\"", err)
	}
	if _, err := queryAs(ctx, url, resB); err != nil {
		t.Fatalf("B's query: %v", err)
	}
}

// TestProvisioningKeepsAQuarantine: a provisioning pass while the lock
// watchdog refuses a role's logins (CONNECTION LIMIT 0) must not give the
// role its limit back early; the watchdog restores it when the back-off
// ends.
func TestProvisioningKeepsAQuarantine(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	spec := newSpec(uniqueSchema(t, "engram_quar_keep"), 3)
	res := mustProvision(t, pool, url, spec)
	if _, err := pool.Exec(ctx, "ALTER ROLE "+pgx.Identifier{res.LoginRole}.Sanitize()+" CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := Provision(ctx, pool, spec); err != nil {
		t.Fatal(err)
	}
	var limit int
	if err := pool.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", res.LoginRole).Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit != 0 {
		t.Fatalf("the quarantined role's limit after a provisioning pass: %d; want 0 kept", limit)
	}
}
