package tenant

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

// quarantineFixture is one tenant on a throw-away instance (the watchdog
// looks at every tenant role of a server: never the shared one), with
// helpers to flood as it, read its limit and try its login.
type quarantineFixture struct {
	t    *testing.T
	in   *testenv.Instance
	url  string
	pool *pgxpool.Pool
	res  *Result
}

func newQuarantineFixture(t *testing.T, instance string) *quarantineFixture {
	in := testenv.NewInstance(t, instance)
	in.Start(t)
	url := in.NewDatabase(t)
	pool := testenv.NewPool(t, url, 2)
	res := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_qstate"), 3))
	return &quarantineFixture{t: t, in: in, url: url, pool: pool, res: res}
}

// watchdog opens a lock watchdog on url with a threshold of 20 locks.
func (f *quarantineFixture) watchdog(url string, backoff time.Duration) *LockWatchdog {
	f.t.Helper()
	cfg := mustParseConfig(f.t, url)
	w, err := OpenLockWatchdog(testCtx(f.t), cfg, LockPolicy{Threshold: 20, Quarantine: backoff})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// flood logs in as the tenant and holds 31 locks; the session stays
// until the watchdog ends it (or the test ends).
func (f *quarantineFixture) flood() error {
	c, err := f.login()
	if err != nil {
		return err
	}
	f.t.Cleanup(func() { _ = c.Close(context.Background()) })
	_, err = c.Exec(testCtx(f.t), floodSQL(30))
	return err
}

func (f *quarantineFixture) login() (*pgx.Conn, error) {
	return pgx.Connect(testCtx(f.t), testenv.WithUser(f.url, f.res.LoginRole, f.res.Password))
}

func (f *quarantineFixture) limit() int {
	f.t.Helper()
	var l int
	if err := f.pool.QueryRow(testCtx(f.t), "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", f.res.LoginRole).Scan(&l); err != nil {
		f.t.Fatal(err)
	}
	return l
}

func (f *quarantineFixture) setLimit(n int) {
	f.t.Helper()
	if _, err := f.pool.Exec(testCtx(f.t), fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", pgx.Identifier{f.res.LoginRole}.Sanitize(), n)); err != nil {
		f.t.Fatal(err)
	}
}

// refused fails the test unless the tenant's login is refused by its
// CONNECTION LIMIT.
func (f *quarantineFixture) refused(when string) {
	f.t.Helper()
	c, err := f.login()
	mustRefuseLogin(f.t, fmt.Sprintf("%s: the tenant's login (CONNECTION LIMIT %d)", when, f.limit()), c, err)
}

// lookFor runs the watchdog's look every 200 ms for d.
func lookFor(t *testing.T, d time.Duration, ws ...*LockWatchdog) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, w := range ws {
			if _, err := w.Look(testCtx(t)); err != nil {
				t.Logf("look: %v", err)
			}
		}
	}
}

// TestQuarantineIsReassertedAtEveryLook (issue 26's fifth review,
// MEDIUM 2): once the watchdog had set a role's CONNECTION LIMIT 0 it never
// looked at the limit again until the back-off ended, so anything that
// wrote the limit back (a sibling's provisioning pass racing the
// watchdog, another watchdog) let the tenant log in and flood again for
// the whole back-off. Now every look reads the limit and applies 0 again.
func TestQuarantineIsReassertedAtEveryLook(t *testing.T) {
	f := newQuarantineFixture(t, "tenant-quarreassert")
	w := f.watchdog(f.url, 30*time.Second)
	if err := f.flood(); err != nil {
		t.Fatalf("the flood: %v", err)
	}
	hogs, err := w.Look(testCtx(t))
	if err != nil || len(hogs) != 1 || !hogs[0].Ended || hogs[0].Quarantine == 0 {
		t.Fatalf("the first look: %+v, %v; want the tenant ended and quarantined", hogs, err)
	}
	f.refused("after the first look")
	f.setLimit(f.res.ConnectionLimit) // what a racing provisioning pass writes
	if _, err := w.Look(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := f.limit(); got != 0 {
		t.Fatalf("the limit after the next look: %d; want 0 applied again within the back-off", got)
	}
	f.refused("after the next look")
}

// TestTwoWatchdogsAgreeOnAQuarantine (issue 26's fifth review, MEDIUM 2):
// each watchdog (one per database and admin user of a server, or a new
// leader) kept its quarantines in its own memory, and one that found a
// role at 0 it had not quarantined took it in with a first back-off of its
// own and restored it early, in the middle of the other's longer one. Now
// the quarantine is kept in the role's marker on the server: a watchdog of
// another database with a 1 s back-off leaves the role alone for the
// other's 6 s, and restores it once those are over.
func TestTwoWatchdogsAgreeOnAQuarantine(t *testing.T) {
	f := newQuarantineFixture(t, "tenant-quartwo")
	other := f.in.NewDatabase(t)
	long := f.watchdog(f.url, 6*time.Second)
	short := f.watchdog(other, time.Second)
	if err := f.flood(); err != nil {
		t.Fatalf("the flood: %v", err)
	}
	started := time.Now()
	if hogs, err := long.Look(testCtx(t)); err != nil || len(hogs) != 1 || hogs[0].Quarantine == 0 {
		t.Fatalf("the first look: %+v, %v; want the tenant quarantined", hogs, err)
	}
	lookFor(t, 3*time.Second, short)
	if time.Since(started) < 6*time.Second {
		f.refused("3 s into a 6 s back-off, after another database's watchdog (1 s back-off) looked")
	}
	lookFor(t, time.Until(started.Add(7*time.Second)), short)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, _ = short.Look(testCtx(t))
		c, err := f.login()
		if err == nil {
			_ = c.Close(context.Background())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant's login after the back-off: %v; want the limit restored", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDBAConnectionLimitZeroIsLeftAlone (issue 26's fifth review, LOW): the
// watchdog took every marked role at CONNECTION LIMIT 0 for a quarantine
// left by a previous leader and restored it after one back-off, undoing a
// DBA who shut a tenant out. Now only a quarantine recorded in the role's
// marker is restored.
func TestDBAConnectionLimitZeroIsLeftAlone(t *testing.T) {
	f := newQuarantineFixture(t, "tenant-quardba")
	w := f.watchdog(f.url, time.Second)
	f.setLimit(0) // the DBA
	lookFor(t, 3*time.Second, w)
	if got := f.limit(); got != 0 {
		t.Fatalf("a DBA's CONNECTION LIMIT 0 after 3 s of looks with a 1 s back-off: %d; want 0 kept", got)
	}
}

// TestProvisioningRacingAQuarantineKeepsIt (issue 26's fifth review,
// MEDIUM 2): provisioning read the namespace's roles, then wrote each
// one's limit; a quarantine the watchdog set in between was overwritten.
// Now the write checks, in the same statement, that the role is neither at
// 0 nor marked quarantined: a pass that read the role before the
// quarantine leaves it in place.
func TestProvisioningRacingAQuarantineKeepsIt(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	res := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_quar_race"), 3))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// What provisioning read before the watchdog's transaction.
	stale := namespaceRole{name: res.LoginRole, limit: res.ConnectionLimit}
	// The watchdog's quarantine: the marker and the limit, in one
	// transaction.
	var comment string
	if err := conn.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, res.LoginRole).Scan(&comment); err != nil {
		t.Fatal(err)
	}
	ident := pgx.Identifier{res.LoginRole}.Sanitize()
	marked := comment + fmt.Sprintf("; quarantined-until=%d; strikes=1", time.Now().Add(time.Minute).Unix())
	if _, err := conn.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+quoteLiteral(marked)+"; ALTER ROLE "+ident+" CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	if err := setConnectionLimit(ctx, conn.Conn(), stale, res.ConnectionLimit+1, true, &Result{}, &siblingLog{}); err != nil {
		t.Fatal(err)
	}
	var limit int
	if err := conn.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", res.LoginRole).Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit != 0 {
		t.Fatalf("the quarantined role's limit after a provisioning write that read it before the quarantine: %d; want 0 kept", limit)
	}
}

// TestQuarantineMarkerRoundTrip: the quarantine's fields are added to and
// replaced in the marker without touching the ownership fields.
func TestQuarantineMarkerRoundTrip(t *testing.T) {
	base := Owner{UID: "u-1", Namespace: "team", Name: "rt"}.marker()
	until := time.Unix(1_800_000_000, 0)
	on := withQuarantine(base, quarantineMark{until: until, strikes: 2})
	m := parseMarker(&on)
	if m.uid != "u-1" || m.runtime != "team/rt" || !m.quarantine.until.Equal(until) || m.quarantine.strikes != 2 {
		t.Fatalf("parseMarker(%q) = %+v", on, m)
	}
	off := withQuarantine(on, quarantineMark{ended: until, strikes: 2})
	m = parseMarker(&off)
	if m.quarantine.active() || !m.quarantine.ended.Equal(until) || m.quarantine.strikes != 2 || m.uid != "u-1" {
		t.Fatalf("parseMarker(%q) = %+v; want the quarantine ended", off, m)
	}
	if got := withQuarantine(off, quarantineMark{}); got != base {
		t.Fatalf("withQuarantine(%q, none) = %q, want %q", off, got, base)
	}
}

// TestCitusWorkerQuarantineWithoutMarker: a Citus worker refuses COMMENT ON ROLE
// ("operation is not allowed on this node") but takes ALTER ROLE, so the
// watchdog of a worker cannot record a quarantine in the role's marker.
// It still refuses the logins there (the limit alone, kept in its own
// memory) and restores them when the back-off ends. The threshold is low
// and the flood small: the shared Citus cluster's lock tables stay far
// from full.
func TestCitusWorkerQuarantineWithoutMarker(t *testing.T) {
	ctx := testCtx(t)
	url := testenv.NewCitusDatabase(t)
	admin := testenv.NewPool(t, url, 1)
	role, password := "engram_qworker_"+strings.ToLower(uniqueSchema(t, "r")), "pw-qworker"
	ident := pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", ident, password),
		fmt.Sprintf("COMMENT ON ROLE %s IS 'managed-by=engram; uid=uid-%s; runtime=ns-%s/rt'", ident, role, role),
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	worker := testenv.CitusWorkerURLs(t, url)[0]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, u := range []string{worker, url} {
			if c, err := pgx.Connect(ctx, u); err == nil {
				_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
				_ = c.Close(ctx)
			}
		}
		_, _ = admin.Exec(ctx, "DROP ROLE IF EXISTS "+ident)
	})
	cfg := mustParseConfig(t, worker)
	w := mustOpenWatchdog(t, ctx, cfg, LockPolicy{Threshold: 20, Quarantine: time.Second})
	hog, err := pgx.Connect(ctx, testenv.WithUser(worker, role, password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hog.Close(context.Background()) })
	var flood strings.Builder
	flood.WriteString("BEGIN; CREATE TEMP TABLE held (x int);")
	for i := range 30 {
		fmt.Fprintf(&flood, " SAVEPOINT s%d; INSERT INTO held VALUES (%d);", i, i)
	}
	if _, err := hog.Exec(ctx, flood.String()); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	hogs, err := w.Look(ctx)
	if err != nil || len(hogs) != 1 || !hogs[0].Ended || hogs[0].Quarantine == 0 {
		t.Fatalf("the look on the worker: %+v, %v; want the role ended and quarantined", hogs, err)
	}
	if c, err := pgx.Connect(ctx, testenv.WithUser(worker, role, password)); err == nil {
		_ = c.Close(context.Background())
		if time.Since(started) < time.Second {
			t.Fatal("the role logs in on the worker during its quarantine")
		}
	} else if !strings.Contains(err.Error(), "too many connections for role") {
		t.Fatalf("the role's login on the worker: %v; want \"too many connections for role\"", err)
	}
	time.Sleep(time.Until(started.Add(1200 * time.Millisecond)))
	if _, err := w.Look(ctx); err != nil {
		t.Fatal(err)
	}
	wpool := testenv.NewPool(t, worker, 1)
	var limit int
	if err := wpool.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", role).Scan(&limit); err != nil || limit == 0 {
		t.Fatalf("the role's limit on the worker after the back-off: %d (%v); want restored", limit, err)
	}
}
