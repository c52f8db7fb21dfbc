package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestTenantCannotFillTheLockTable: advisory locks live in the server's
// shared lock table and a session keeps them until it ends; one tenant's
// login role taking ~13,000 of them ran every other tenant's queries, the
// reaper and provisioning into "out of shared memory" (issue 26's
// re-review). Provisioning revokes every advisory-lock function from
// PUBLIC, so the attack is refused at its first lock: tenant A's login
// role gets "permission denied" from each of them (every signature the
// catalog has, on every Citus worker too), holds no advisory lock, and
// tenant B's queries work. The test never fills the shared server's lock
// table: it asserts the permission, which is the cause.
func TestTenantCannotFillTheLockTable(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	a := newSpec(uniqueSchema(t, "engram_locktab_a"), 3)
	resA := mustProvision(t, pool, url, a)
	resB := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_locktab_b"), 3))
	if len(resA.Warnings) > 0 {
		t.Fatalf("a superuser admin's provisioning warns: %q", resA.Warnings)
	}
	funcs := advisoryLockCalls(t, url)
	if len(funcs) < 16 {
		t.Fatalf("found %d advisory-lock functions in pg_catalog, want the 16 of PostgreSQL 17: %q", len(funcs), funcs)
	}
	connA := loginConn(t, url, resA, resA.Password)
	wantAdvisoryRefused(t, "A", connA, funcs)
	connB := loginConn(t, url, resB, resB.Password)
	seedMemories(t, connB, 10)
	for _, stmt := range []string{
		"SELECT count(*) FROM memories",
		"UPDATE memories SET importance = importance",
		"DELETE FROM memories WHERE id IN (SELECT id FROM memories LIMIT 1)",
	} {
		if _, err := connB.Exec(ctx, stmt); err != nil {
			t.Errorf("tenant B's %q after A's attempt: %v", stmt, err)
		}
	}
	if testenv.OnCitus() {
		for _, w := range testenv.CitusWorkerURLs(t, url) {
			cfg := mustParseConfig(t, testenv.WithUser(w, resA.LoginRole, resA.Password))
			worker := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Logf("worker %s refuses A's login: %v", worker, err) // isolated as well
				continue
			}
			wantAdvisoryRefused(t, "A on worker "+worker, conn, funcs)
			_ = conn.Close(context.Background())
		}
	}
	// The revoke is done once: the next pass finds nothing to change.
	if again, err := Provision(ctx, pool, a); err != nil || again.Changed() || len(again.Warnings) > 0 {
		t.Fatalf("re-provisioning A: %+v, %v; want no change and no warning", again, err)
	}
}

// TestAdvisoryLockRevokeNeedsTheDBA: a CREATEROLE admin may not revoke the
// advisory-lock functions (PostgreSQL only warns and changes nothing), so
// provisioning succeeds and says in a warning what a superuser must run;
// once a DBA has run it, the warning is gone and the login role is refused.
func TestAdvisoryLockRevokeNeedsTheDBA(t *testing.T) {
	ctx := testCtx(t)
	pool, url, superURL := restrictedAdmin(t, false) // its database has the functions open: the DBA step is not done
	spec := newSpec(uniqueSchema(t, "engram_locktab_dba"), 3)
	res := mustProvision(t, pool, superURL, spec)
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "REVOKE EXECUTE ON FUNCTION") ||
		!strings.Contains(res.Warnings[0], "pg_advisory_lock(bigint)") || !strings.Contains(res.Warnings[0], "superuser") {
		t.Fatalf("warnings of a CREATEROLE admin's provisioning = %q; want one naming the REVOKE a superuser must run", res.Warnings)
	}
	funcs := advisoryLockCalls(t, superURL)
	super := testenv.NewPool(t, superURL, 1)
	stmt := res.Warnings[0][strings.Index(res.Warnings[0], "REVOKE"):strings.Index(res.Warnings[0], " FROM PUBLIC")] + " FROM PUBLIC"
	if _, err := super.Exec(ctx, stmt); err != nil {
		t.Fatalf("the DBA runs the warning's statement %q: %v", stmt, err)
	}
	again, err := Provision(ctx, pool, spec)
	if err != nil || len(again.Warnings) > 0 {
		t.Fatalf("provisioning after the DBA's revoke: %+v, %v; want no warning", again, err)
	}
	wantAdvisoryRefused(t, "the login role", loginConn(t, url, res, res.Password), funcs)
}

// advisoryLockCalls returns one call of every advisory-lock function of
// pg_catalog (the unlock functions excepted), read as the admin of url.
func advisoryLockCalls(t *testing.T, url string) []string {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(testCtx(t), `SELECT format('SELECT %s(%s)', p.proname,
			CASE p.pronargs WHEN 1 THEN '1::bigint' ELSE '1, 2' END)`+advisoryLockProcs+` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// wantEachRefused runs every call on conn (as who) and wants each refused
// with permission denied (42501).
func wantEachRefused(t *testing.T, who string, conn *pgx.Conn, calls []string) {
	t.Helper()
	ctx := testCtx(t)
	for _, call := range calls {
		_, err := conn.Exec(ctx, call)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: %s: %v; want permission denied (42501)", who, call, err)
		}
	}
}

// wantAdvisoryRefused runs every call on conn and wants each refused with
// permission denied, and then no advisory lock held by the session. A
// call that succeeds takes one lock, which the session gives back.
func wantAdvisoryRefused(t *testing.T, who string, conn *pgx.Conn, calls []string) {
	t.Helper()
	ctx := testCtx(t)
	wantEachRefused(t, who, conn, calls)
	var held int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held > 0 {
		t.Errorf("%s holds %d advisory locks", who, held)
		_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	}
}
