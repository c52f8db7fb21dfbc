package tenant

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// reapMaxAge is the reaper's maximum age in these tests (60 s by default).
const reapMaxAge = 2 * time.Second

// skipReaperOnCitus: the reaper does not run on Citus
// (TestCitusReaperEndsNothing).
func skipReaperOnCitus(t *testing.T) {
	testenv.SkipOnCitus(t, "the transaction reaper does not run on a Citus cluster (ErrReaperOnCitus, TestCitusReaperEndsNothing)")
}

// TestTenantSnapshotCannotHoldBackAnotherTenantsCleanup is the MEDIUM of
// issue 26's hostile review: tenant A's login role holds a snapshot open
// (its timeouts SET away) outside any provisioning, and tenant B's VACUUM,
// which its compact job runs, can remove none of the rows B deleted. The
// reaper ends A's session once its transaction is older than the maximum
// age, and B's VACUUM then removes them all; A's committed rows remain.
// With a superuser admin the reaper reads the transaction's start; a
// CREATEROLE admin without pg_read_all_stats cannot, and counts from when
// it first saw the transaction.
func TestTenantSnapshotCannotHoldBackAnotherTenantsCleanup(t *testing.T) {
	skipReaperOnCitus(t)
	t.Run("superuser admin", func(t *testing.T) {
		pool, url := adminPool(t)
		testSnapshotReaped(t, pool, url, url)
	})
	t.Run("CREATEROLE admin without pg_read_all_stats", func(t *testing.T) {
		pool, url, superURL := restrictedAdmin(t, true)
		testSnapshotReaped(t, pool, url, superURL)
	})
}

func testSnapshotReaped(t *testing.T, pool *pgxpool.Pool, url, superURL string) {
	ctx := testCtx(t)
	a := newSpec(uniqueSchema(t, "engram_hz_a"), 3)
	resA := mustProvisionRestricted(t, pool, url, superURL, a)
	loginA := testenv.WithUser(url, resA.LoginRole, resA.Password)
	committed := seedMemories(t, loginConn(t, url, resA, resA.Password), 100)
	b := newSpec(uniqueSchema(t, "engram_hz_b"), 3)
	resB := mustProvisionRestricted(t, pool, url, superURL, b)

	snap := testenv.HoldSnapshot(t, loginA, "SELECT count(*) FROM memories")
	connB := loginConn(t, url, resB, resB.Password)
	seedMemories(t, connB, 2000)
	if _, err := connB.Exec(ctx, "DELETE FROM memories"); err != nil {
		t.Fatal(err)
	}
	if removed, kept := vacuumMemories(t, url, resB); kept != 2000 {
		t.Fatalf("B's VACUUM behind A's snapshot removed %d and kept %d dead rows, want 2000 kept: the snapshot holds nothing back", removed, kept)
	}

	r := &Reaper{MaxAge: reapMaxAge}
	start := time.Now()
	var got HeldTransaction
	eventually(t, "the reaper ends A's session", reapMaxAge+time.Minute, func() error {
		ended, err := r.Look(ctx, pool)
		if err != nil {
			return err
		}
		for _, h := range ended {
			if h.PID == snap.PID {
				got = h
				return nil
			}
		}
		return fmt.Errorf("not ended yet: %+v", ended)
	})
	t.Logf("A's session ended %s after the reaper's first look: %s, open for %s", time.Since(start).Round(time.Millisecond), got, got.OpenFor.Round(time.Millisecond))
	if !got.Ended || got.Problem != "" || got.Tenant != a.Owner || got.Role != resA.LoginRole {
		t.Fatalf("reported %+v, want ended, of role %s of %+v", got, resA.LoginRole, a.Owner)
	}
	if got.OpenFor < reapMaxAge {
		t.Errorf("A's session was ended after %s, before the maximum age of %s", got.OpenFor, reapMaxAge)
	}
	if err := snap.Alive(); err == nil {
		t.Fatal("A's session is still alive")
	}
	if removed, kept := vacuumMemories(t, url, resB); removed != 2000 || kept != 0 {
		t.Fatalf("B's VACUUM once A's session is gone removed %d and kept %d dead rows, want 2000 and 0", removed, kept)
	}
	if n := countMemories(t, loginA, ""); n != committed {
		t.Fatalf("A has %d memories after its session was ended, want the %d it committed", n, committed)
	}
	if _, err := connB.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("B's idle session was ended: %v", err)
	}
}

// vacuumTuples reads VACUUM VERBOSE's "tuples: N removed, M remain, K are
// dead but not yet removable".
var vacuumTuples = regexp.MustCompile(`tuples: (\d+) removed, \d+ remain, (\d+) are dead but not yet removable`)

// vacuumMemories runs VACUUM (VERBOSE) on the memories table as the
// tenant's login role, as its compact job does, and returns how many dead
// rows it removed and how many it had to keep.
func vacuumMemories(t *testing.T, adminURL string, res *Result) (removed, kept int) {
	t.Helper()
	cfg := mustParseConfig(t, testenv.WithUser(adminURL, res.LoginRole, res.Password))
	var report string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, `.memories"`) && vacuumTuples.MatchString(n.Message) {
			report = n.Message
		}
	}
	conn, err := pgx.ConnectConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(testCtx(t), "VACUUM (VERBOSE) memories"); err != nil {
		t.Fatal(err)
	}
	m := vacuumTuples.FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("VACUUM VERBOSE reported no tuples line for memories: %q", report)
	}
	removed, _ = strconv.Atoi(m[1])
	kept, _ = strconv.Atoi(m[2])
	return removed, kept
}

// TestReaperEndsOnlyTenantsHoldingTheHorizon: sessions the reaper must
// never end, however old their transaction: a DBA's (a role without a
// marker), a legacy tenant role's (a marker without a UID, documented), a
// tenant's READ COMMITTED transaction that holds no snapshot between its
// statements, and a tenant's own lazy VACUUM (whose snapshot PostgreSQL
// ignores). A tenant's snapshot next to them is ended.
func TestReaperEndsOnlyTenantsHoldingTheHorizon(t *testing.T) {
	skipReaperOnCitus(t)
	pool, url := adminPool(t)
	ctx := testCtx(t)
	a := newSpec(uniqueSchema(t, "engram_keep_a"), 3)
	resA := mustProvision(t, pool, url, a)
	loginA := testenv.WithUser(url, resA.LoginRole, resA.Password)
	seedMemories(t, loginConn(t, url, resA, resA.Password), 5000)

	dba := fmt.Sprintf("engram_test_dba_%d", time.Now().UnixNano()%1e9)
	legacy := fmt.Sprintf("engram_test_legacy_%d", time.Now().UnixNano()%1e9)
	for _, stmt := range []string{
		"CREATE ROLE " + dba + " LOGIN PASSWORD 'dba'",
		"CREATE ROLE " + legacy + " LOGIN PASSWORD 'legacy'",
		"COMMENT ON ROLE " + legacy + " IS 'managed-by=engram'",
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+dba+", "+legacy) })

	kept := map[string]*testenv.Snapshot{
		"a DBA":                  testenv.HoldSnapshot(t, testenv.WithUser(url, dba, "dba"), "SELECT 1"),
		"a legacy role (no UID)": testenv.HoldSnapshot(t, testenv.WithUser(url, legacy, "legacy"), "SELECT 1"),
	}
	readCommitted := loginConn(t, url, resA, resA.Password)
	for _, s := range []string{"SET idle_in_transaction_session_timeout = 0", "BEGIN", "SELECT count(*) FROM memories"} {
		if _, err := readCommitted.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	vacuum := slowVacuum(t, url, resA)
	snap := testenv.HoldSnapshot(t, loginA, "SELECT 1")

	r := &Reaper{MaxAge: reapMaxAge}
	deadline := time.Now().Add(reapMaxAge + 2*time.Second)
	var ended []HeldTransaction
	for time.Now().Before(deadline) {
		got, err := r.Look(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		ended = append(ended, got...)
		time.Sleep(200 * time.Millisecond)
	}
	if len(ended) != 1 || ended[0].PID != snap.PID || !ended[0].Ended {
		t.Fatalf("the reaper ended %+v, want only A's snapshot (session %d)", ended, snap.PID)
	}
	for who, s := range kept {
		if err := s.Alive(); err != nil {
			t.Errorf("%s's session was ended: %v", who, err)
		}
	}
	if _, err := readCommitted.Exec(ctx, "COMMIT"); err != nil {
		t.Errorf("A's READ COMMITTED transaction was ended: %v", err)
	}
	vacuum.checkUntouched(t)
}

// runningVacuum is a VACUUM of a tenant's login role slowed down by cost
// delays, so that it runs for longer than the reaper's maximum age.
type runningVacuum struct {
	conn  *pgx.Conn
	pid   int
	done  chan struct{} // closed when the VACUUM returned, with err
	err   error
	admin *pgxpool.Pool
}

// slowVacuum starts VACUUM memories as the login role of res, throttled by
// the cost delays the role may set, and waits until PostgreSQL reports it
// running. adminURL must be a superuser's (it cancels the VACUUM).
func slowVacuum(t *testing.T, adminURL string, res *Result) *runningVacuum {
	t.Helper()
	conn := loginConn(t, adminURL, res, res.Password)
	for _, s := range []string{"SET statement_timeout = 0", "SET vacuum_cost_delay = 100", "SET vacuum_cost_limit = 1"} {
		if _, err := conn.Exec(testCtx(t), s); err != nil {
			t.Fatal(err)
		}
	}
	v := &runningVacuum{conn: conn, pid: int(conn.PgConn().PID()), done: make(chan struct{}), admin: testenv.NewPool(t, adminURL, 1)}
	go func() {
		_, v.err = conn.Exec(context.Background(), "VACUUM memories")
		close(v.done)
	}()
	t.Cleanup(func() { // before the connection is closed
		_, _ = v.admin.Exec(context.Background(), "SELECT pg_cancel_backend($1)", v.pid)
		<-v.done
	})
	eventually(t, "the VACUUM runs", 30*time.Second, func() error {
		var n int
		if err := v.admin.QueryRow(testCtx(t), "SELECT count(*) FROM pg_stat_progress_vacuum WHERE pid = $1", v.pid).Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("not in pg_stat_progress_vacuum (%d, %v)", n, err)
		}
		return nil
	})
	return v
}

// checkUntouched cancels the VACUUM if it still runs and fails the test if
// its session was ended (57P01) rather than cancelled (57014) or done.
func (v *runningVacuum) checkUntouched(t *testing.T) {
	t.Helper()
	if _, err := v.admin.Exec(testCtx(t), "SELECT pg_cancel_backend($1)", v.pid); err != nil {
		t.Fatal(err)
	}
	<-v.done
	if v.err != nil && pgCode(v.err) != "57014" {
		t.Fatalf("the tenant's VACUUM failed: %v", v.err)
	}
	if _, err := v.conn.Exec(testCtx(t), "SELECT 1"); err != nil {
		t.Fatalf("the tenant's VACUUM session was ended: %v", err)
	}
}

// TestReaperEndRefusedNamesThePrivilege: an admin role without
// pg_signal_backend may not end a tenant's session: the reaper reports it
// once, naming the privilege, and ends it at the first look after the
// grant.
func TestReaperEndRefusedNamesThePrivilege(t *testing.T) {
	pool, url, superURL := restrictedAdmin(t, false)
	ctx := testCtx(t)
	a := newSpec(uniqueSchema(t, "engram_reap_priv"), 3)
	resA := mustProvisionRestricted(t, pool, url, superURL, a)
	snap := testenv.HoldSnapshot(t, testenv.WithUser(url, resA.LoginRole, resA.Password), "SELECT 1")

	r := &Reaper{MaxAge: reapMaxAge}
	var reports []HeldTransaction
	eventually(t, "a report that the session may not be ended", reapMaxAge+time.Minute, func() error {
		got, err := r.Look(ctx, pool)
		if err != nil {
			return err
		}
		reports = append(reports, got...)
		if len(reports) == 0 {
			return errors.New("nothing reported yet")
		}
		return nil
	})
	if len(reports) != 1 || reports[0].PID != snap.PID || reports[0].Ended || !strings.Contains(reports[0].Problem, "pg_signal_backend") {
		t.Fatalf("reported %+v, want session %d not ended, naming pg_signal_backend", reports, snap.PID)
	}
	if again, err := r.Look(ctx, pool); err != nil || len(again) != 0 {
		t.Fatalf("the next look reported %+v (%v), want nothing: a problem is reported once", again, err)
	}
	if err := snap.Alive(); err != nil {
		t.Fatalf("the session was ended without the privilege: %v", err)
	}
	grantSignalBackend(t, pool, superURL)
	got, err := r.Look(ctx, pool)
	if err != nil || len(got) != 1 || !got[0].Ended || got[0].PID != snap.PID {
		t.Fatalf("the first look after the grant: %+v, %v; want session %d ended", got, err, snap.PID)
	}
	if err := snap.Alive(); err == nil {
		t.Fatal("the session is still alive after the grant")
	}
}

// TestCitusReaperEndsNothing: on a Citus coordinator the reaper looks at
// nothing and ends nothing (ErrReaperOnCitus: the operator looks at the
// workers instead, TestCitusReaperEndsAWorkerSnapshot), not even a
// tenant's coordinator snapshot held past the maximum age.
func TestCitusReaperEndsNothing(t *testing.T) {
	pool, url := citusPool(t)
	a := newSpec(uniqueSchema(t, "engram_citus_reap"), 3)
	resA := mustProvision(t, pool, url, a)
	snap := testenv.HoldSnapshot(t, testenv.WithUser(url, resA.LoginRole, resA.Password), "SELECT count(*) FROM memories")
	r := &Reaper{MaxAge: time.Millisecond}
	for range 3 {
		time.Sleep(10 * time.Millisecond)
		if got, err := r.Look(testCtx(t), pool); !errors.Is(err, ErrReaperOnCitus) || len(got) != 0 {
			t.Fatalf("Look on Citus: %+v, %v; want nothing and ErrReaperOnCitus", got, err)
		}
	}
	if err := snap.Alive(); err != nil {
		t.Fatalf("the tenant's session was ended: %v", err)
	}
}
