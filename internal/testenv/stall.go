package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Snapshot is a session that holds a snapshot open: what a hostile tenant
// does to stall every CREATE INDEX CONCURRENTLY of its database.
type Snapshot struct {
	Conn *pgx.Conn
	PID  int
}

// HoldSnapshot logs in with url and holds a snapshot until the test ends:
// it SETs away every timeout its role could have by default, starts a
// REPEATABLE READ transaction and runs query in it (a READ COMMITTED
// transaction that is idle holds no snapshot). The session stays idle in
// that transaction.
func HoldSnapshot(t testing.TB, url, query string) *Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to hold a snapshot: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, stmt := range []string{
		"SET statement_timeout = 0", "SET lock_timeout = 0",
		"SET idle_in_transaction_session_timeout = 0", "SET idle_session_timeout = 0",
		"BEGIN ISOLATION LEVEL REPEATABLE READ", query,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("holding a snapshot: %s: %v", stmt, err)
		}
	}
	var xmin *string
	if err := conn.QueryRow(ctx, `SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&xmin); err != nil || xmin == nil {
		t.Fatalf("the session holds no snapshot (backend_xmin %v): %v", xmin, err)
	}
	return &Snapshot{Conn: conn, PID: int(conn.PgConn().PID())}
}

// Alive reports whether the session still answers (in its transaction).
func (s *Snapshot) Alive() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.Conn.Exec(ctx, "SELECT 1")
	return err
}

// advisoryFunctions lists the advisory-lock functions of the database.
func advisoryFunctions(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname ~ '^pg_(try_)?advisory_'
		ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ArmAdvisoryTrap makes every advisory lock of the database of adminURL
// fail for everyone but superusers and the roles in allowed: it revokes
// EXECUTE on every pg_catalog advisory-lock function from PUBLIC in that
// database only (function privileges are per database) and grants it to
// allowed. A tenant may take any advisory key there; if the work of another
// tenant (a non-superuser role) took one, whatever its key, it would fail
// with "permission denied", so a test cannot miss a key it did not think of.
func ArmAdvisoryTrap(t testing.TB, adminURL string, allowed ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	funcs, err := advisoryFunctions(ctx, conn)
	if err != nil || len(funcs) < 10 {
		t.Fatalf("listing the advisory-lock functions: %v (found %v)", err, funcs)
	}
	for _, f := range funcs {
		stmt := "REVOKE EXECUTE ON FUNCTION " + f + " FROM PUBLIC"
		if len(allowed) > 0 {
			stmt += "; GRANT EXECUTE ON FUNCTION " + f + " TO " + quoteRoles(allowed)
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// AdvisoryTrapped checks that the role of url cannot take an advisory lock
// (the trap is armed for it): nil when it is refused with 42501.
func AdvisoryTrapped(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	funcs, err := advisoryFunctions(ctx, conn)
	if err != nil {
		return err
	}
	var pgErr *pgconn.PgError
	for _, stmt := range []string{`SELECT pg_advisory_xact_lock(1)`, `SELECT pg_try_advisory_lock(1, 2)`, `SELECT pg_advisory_lock_shared(3)`} {
		if _, err := conn.Exec(ctx, stmt); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			return fmt.Errorf("%s: %v; want permission denied (42501): the trap is not armed for this role (functions %v)", stmt, err, funcs)
		}
	}
	return nil
}

func quoteRoles(roles []string) string {
	q := make([]string, len(roles))
	for i, r := range roles {
		q[i] = pgx.Identifier{r}.Sanitize()
	}
	return strings.Join(q, ", ")
}
