package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// preConcurrentVersion is the last schema version before the first
// migration that builds an index concurrently (7): a schema provisioned to
// it upgrades through CREATE INDEX CONCURRENTLY (migrations 7, 10 and 12).
const preConcurrentVersion = 6

// blockerLog collects the reports of a BlockerPolicy.
type blockerLog struct {
	mu  sync.Mutex
	all []Blocker
}

// policy ends other tenants' blockers after maxAge, looks every 100 ms
// and collects what it reports.
func (l *blockerLog) policy(maxAge time.Duration) BlockerPolicy {
	return BlockerPolicy{MaxAge: maxAge, Interval: 100 * time.Millisecond, Report: func(b Blocker) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.all = append(l.all, b)
	}}
}

// find returns the last report about pid.
func (l *blockerLog) find(pid int) (Blocker, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.all) - 1; i >= 0; i-- {
		if l.all[i].PID == pid {
			return l.all[i], true
		}
	}
	return Blocker{}, false
}

func (l *blockerLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, b := range l.all {
		out = append(out, fmt.Sprintf("{%s ended=%v open=%s problem=%q}", b, b.Ended, b.OpenFor.Round(time.Millisecond), b.Problem))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// operatorPool is a pool on url with the operator's session settings
// (controller/pools.go), the lock timeout shorter than the blocker's
// maximum age, as with the operator's defaults (5 s and 60 s).
func operatorPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool := testenv.NewPool(t, url+"&lock_timeout=1000&statement_timeout=60000&application_name=engram-operator", 4)
	var lock string
	if err := pool.QueryRow(testCtx(t), "SHOW lock_timeout").Scan(&lock); err != nil || lock != "1s" {
		t.Fatalf("the operator-like pool has lock_timeout %q (%v), want 1s", lock, err)
	}
	return pool
}

// TestTenantSnapshotCannotStallAnotherTenantsMigration is issue 26's "no
// tenant can stall another": tenant A's login role holds a snapshot open
// forever (its timeouts SET away), which makes every CREATE INDEX
// CONCURRENTLY of the database wait. Tenant B's schema upgrade through
// migrations 7, 10 and 12 (concurrent index builds) completes: the
// operator ends A's session once it has been in the way for the maximum
// age (longer than the admin session's lock timeout, which the builds wait
// under), reports it, and A's committed data is all there.
func TestTenantSnapshotCannotStallAnotherTenantsMigration(t *testing.T) {
	_, url := adminPool(t)
	if !strings.Contains(url, "?") {
		t.Fatalf("the test URL has no query to add settings to: %s", url)
	}
	pool := operatorPool(t, url)
	a := newSpec(uniqueSchema(t, "engram_snap_a"), 3)
	resA := mustProvision(t, pool, url, a)
	loginA := testenv.WithUser(url, resA.LoginRole, resA.Password)
	committed := seedMemories(t, loginConn(t, url, resA, resA.Password), 500)

	b := newSpec(uniqueSchema(t, "engram_snap_b"), 3)
	dropRolesAfter(t, url, b.Schema)
	if _, err := provisionTo(testCtx(t), pool, b, preConcurrentVersion); err != nil {
		t.Fatal(err)
	}
	snap := testenv.HoldSnapshot(t, loginA, "SELECT count(*) FROM memories")

	var log blockerLog
	b.Blockers = log.policy(2 * time.Second)
	// Without the watcher the first concurrent build waits for A until this
	// timeout (the default is 30 minutes) and the upgrade fails.
	b.IndexTimeout = time.Minute
	start := time.Now()
	res, err := Provision(testCtx(t), pool, b)
	if err != nil {
		t.Fatalf("tenant B's upgrade while tenant A holds a snapshot: %v (reported: %s)", err, log.String())
	}
	t.Logf("B's upgrade from version %d took %s; reported: %s", preConcurrentVersion, time.Since(start).Round(time.Millisecond), log.String())
	if res.Version != LatestVersion {
		t.Fatalf("B is at version %d, want %d", res.Version, LatestVersion)
	}
	got, ok := log.find(snap.PID)
	if !ok || !got.Ended || got.Kind != BlockerOtherTenant || got.Tenant != a.Owner || got.Role != resA.LoginRole {
		t.Fatalf("A's session %d was not reported as an ended blocker of another tenant (%+v): %s", snap.PID, a.Owner, log.String())
	}
	if got.OpenFor < 2*time.Second {
		t.Errorf("A's session was ended after %s, before the maximum age of 2s", got.OpenFor)
	}
	if err := snap.Alive(); err == nil {
		t.Fatal("A's blocking session is still alive")
	}
	if n := countMemories(t, loginA, ""); n != committed {
		t.Fatalf("A has %d memories after its session was ended, want the %d it committed", n, committed)
	}
}

// TestBlockersNotOfAnotherTenantAreNeverEnded: a session of a role that is
// not a tenant's login role (a DBA, another application) and a session of
// the tenant's own login role are reported and waited for, never ended:
// the upgrade fails at its statement timeout with an error naming them, and
// succeeds once they are gone. A tenant cannot make its role pass for
// another runtime's or for none (the marker is a role comment).
func TestBlockersNotOfAnotherTenantAreNeverEnded(t *testing.T) {
	pool, url := adminPool(t)
	dba := fmt.Sprintf("engram_test_dba_%d", time.Now().UnixNano()%1e9)
	if _, err := pool.Exec(testCtx(t), "CREATE ROLE "+dba+" LOGIN PASSWORD 'dba'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+dba) })

	for _, tc := range []struct {
		name string
		kind BlockerKind
	}{
		{"a DBA", BlockerNotTenant},
		{"the tenant itself", BlockerSameTenant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			b := newSpec(uniqueSchema(t, "engram_keep_b"), 3)
			dropRolesAfter(t, url, b.Schema)
			resB, err := provisionTo(ctx, pool, b, preConcurrentVersion)
			if err != nil {
				t.Fatal(err)
			}
			loginB := testenv.WithUser(url, resB.LoginRole, resB.Password)
			if _, err := loginConn(t, url, resB, resB.Password).Exec(ctx,
				"COMMENT ON ROLE "+pgx.Identifier{resB.LoginRole}.Sanitize()+" IS 'managed-by=engram; uid=uid-of-another; runtime=x/y'"); pgCode(err) != "42501" {
				t.Fatalf("a tenant's login role rewriting its own ownership marker: %v, want 42501", err)
			}
			blocker := testenv.WithUser(url, dba, "dba")
			if tc.kind == BlockerSameTenant {
				blocker = loginB
			}
			snap := testenv.HoldSnapshot(t, blocker, "SELECT 1")
			var log blockerLog
			b.Blockers = log.policy(500 * time.Millisecond)
			b.IndexTimeout = 4 * time.Second
			_, err = Provision(ctx, pool, b)
			var blocked *BlockedError
			if !errors.As(err, &blocked) || len(blocked.Blockers) == 0 || blocked.Blockers[0].PID != snap.PID ||
				!strings.Contains(err.Error(), fmt.Sprintf("session %d", snap.PID)) {
				t.Fatalf("upgrade behind %s's snapshot: %v; want a BlockedError naming session %d", tc.name, err, snap.PID)
			}
			got, ok := log.find(snap.PID)
			if !ok || got.Ended || got.Kind != tc.kind || got.Problem == "" {
				t.Fatalf("%s's session %d was not reported as kept (%s): %s", tc.name, snap.PID, tc.kind, log.String())
			}
			if err := snap.Alive(); err != nil {
				t.Fatalf("%s's session was ended: %v", tc.name, err)
			}
			if _, err := snap.Conn.Exec(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
			if res, err := Provision(ctx, pool, b); err != nil || res.Version != LatestVersion {
				t.Fatalf("upgrade once the snapshot is gone: %+v, %v", res, err)
			}
		})
	}
}

// TestBlockerEndRefusedNamesThePrivilege: an admin role without
// pg_signal_backend may not end another tenant's session: the report and
// the error say which privilege to grant; granted meanwhile, the next look
// ends the session and the statement completes.
func TestBlockerEndRefusedNamesThePrivilege(t *testing.T) {
	pool, url, superURL := restrictedAdmin(t, false)
	ctx := testCtx(t)
	a := newSpec(uniqueSchema(t, "engram_priv_a"), 3)
	resA := mustProvisionRestricted(t, pool, url, superURL, a)
	snap := testenv.HoldSnapshot(t, testenv.WithUser(url, resA.LoginRole, resA.Password), "SELECT count(*) FROM memories")

	// A statement of the restricted admin that waits for A's snapshot.
	admin, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Release()
	if _, err := admin.Exec(ctx, "CREATE TABLE IF NOT EXISTS engram_control.watch_test (x int)"); err != nil {
		t.Fatal(err)
	}
	var log blockerLog
	watch := startBlockerWatch(ctx, pool.Config().ConnConfig, int(admin.Conn().PgConn().PID()), Owner{UID: "uid-b"}, log.policy(500*time.Millisecond))
	built := make(chan error, 1)
	if _, err := admin.Exec(ctx, "SET statement_timeout = '60s'"); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := admin.Exec(ctx, "CREATE INDEX CONCURRENTLY watch_test_idx ON engram_control.watch_test (x)")
		built <- err
	}()
	eventually(t, "a report that the session may not be ended", 30*time.Second, func() error {
		if b, ok := log.find(snap.PID); !ok || b.Ended || !strings.Contains(b.Problem, "pg_signal_backend") {
			return fmt.Errorf("reports: %s", log.String())
		}
		return nil
	})
	if err := snap.Alive(); err != nil {
		t.Fatalf("the session was ended without the privilege: %v", err)
	}
	grantSignalBackend(t, pool, superURL)
	if err := <-built; err != nil {
		t.Fatalf("the index build after the grant: %v (reports %s)", err, log.String())
	}
	if left := watch.stop(); len(left) != 0 {
		t.Errorf("blockers left unresolved after the grant: %+v", left)
	}
	if b, _ := log.find(snap.PID); !b.Ended {
		t.Fatalf("the session was not reported ended after the grant: %s", log.String())
	}
}

// eventually polls check until it returns nil, or fails the test.
func eventually(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	testenv.Eventually(t, what, timeout, check)
}

// pgCode returns the SQLSTATE of err, "" when it has none.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
