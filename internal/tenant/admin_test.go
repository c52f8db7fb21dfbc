package tenant

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// restrictedAdmin creates a login role with CREATEROLE and CREATE on the
// database, not a superuser: what a platform team gives the operator
// (docs/operations.md), plus pg_signal_backend when signal is set. It
// returns a fresh database and a pool logged in as that role. The role is
// dropped after the database (cleanups run last-in, first-out).
func restrictedAdmin(t *testing.T, signal bool) (pool *pgxpool.Pool, url, superURL string) {
	t.Helper()
	testenv.SkipOnCitus(t, "a Citus cluster is administered by its superuser, which creates the roles on the workers too (docs/scale-out.md); a role the test creates on the coordinator before its database exists is unknown to that database's workers")
	ctx := testCtx(t)
	server, err := pgx.Connect(ctx, testenv.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close(context.Background())
	name := fmt.Sprintf("engram_test_admin_%d", time.Now().UnixNano()%1e9)
	if _, err := server.Exec(ctx, "CREATE ROLE "+name+" LOGIN CREATEROLE PASSWORD 'admin'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), testenv.AdminURL(t)); err == nil {
			_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
			_ = c.Close(context.Background())
		}
	})
	if signal {
		if _, err := server.Exec(ctx, "GRANT pg_signal_backend TO "+name); err != nil {
			t.Fatal(err)
		}
	}
	superURL = testenv.NewDatabase(t)
	super := testenv.NewPool(t, superURL, 2)
	var db string
	if err := super.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	// Provisioning revokes TEMPORARY from PUBLIC, which only the database's
	// owner may do: done here, as the docs ask of a DBA.
	if _, err := super.Exec(ctx, "GRANT CREATE ON DATABASE "+db+" TO "+name+"; REVOKE TEMPORARY ON DATABASE "+db+" FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	url = testenv.WithUser(superURL, name, "admin")
	return testenv.NewPool(t, url, 4), url, superURL
}

// mustProvisionRestricted is mustProvision through a restricted admin
// (restrictedAdmin's pool and url); the superuser drops the roles when the
// test ends, as the restricted admin may not.
func mustProvisionRestricted(t *testing.T, pool *pgxpool.Pool, url, superURL string, spec Spec) *Result {
	t.Helper()
	res := mustProvision(t, pool, url, spec)
	dropRolesAfter(t, superURL, spec.Schema)
	return res
}

// grantSignalBackend grants pg_signal_backend, as the superuser of
// superURL, to the role pool logs in as: a restrictedAdmin given the
// privilege halfway through a test.
func grantSignalBackend(t *testing.T, pool *pgxpool.Pool, superURL string) {
	t.Helper()
	ctx := testCtx(t)
	var who string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.NewPool(t, superURL, 1).Exec(ctx, "GRANT pg_signal_backend TO "+who); err != nil {
		t.Fatal(err)
	}
}

// seedMemories inserts n committed memories as the tenant's login role and
// returns how many the tenant has.
func seedMemories(t *testing.T, conn *pgx.Conn, n int) int {
	t.Helper()
	if _, err := conn.Exec(testCtx(t), `INSERT INTO memories (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'owner-' || (g % 7), 'user', 'contextual', 'committed memory ' || g, '[1,0,0]'
		FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	return countMemories(t, conn.Config().ConnString(), "")
}

// countMemories counts the memories of schema ("" = the login role's own,
// through its search_path) on a fresh connection.
func countMemories(t *testing.T, url, schema string) int {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	table := "memories"
	if schema != "" {
		table = pgx.Identifier{schema, "memories"}.Sanitize()
	}
	var n int
	if err := conn.QueryRow(testCtx(t), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCreateroleAdminProvisionsAndDrops: the operator's admin needs
// CREATEROLE and CREATE on the database, not superuser (docs/operations.md).
// From PostgreSQL 16 on, such a role holds the roles it creates with ADMIN
// only, without SET or their privileges: provisioning grants it the owner
// role (to create the tenant's objects as that role and grant on them), and
// drop grants it each role before DROP OWNED BY. Before, provisioning failed
// with "must be able to SET ROLE" and drop with "permission denied to drop
// objects".
func TestCreateroleAdminProvisionsAndDrops(t *testing.T) {
	pool, url, superURL := restrictedAdmin(t, false)
	ctx := testCtx(t)
	spec := newSpec(uniqueSchema(t, "engram_createrole"), 3)
	res := mustProvisionRestricted(t, pool, url, superURL, spec)
	if res.Version != LatestVersion {
		t.Fatalf("provisioned at version %d, want %d", res.Version, LatestVersion)
	}
	seedMemories(t, loginConn(t, url, res, res.Password), 3)
	if again, err := Provision(ctx, pool, spec); err != nil || again.Changed() {
		t.Fatalf("second provisioning: %+v, %v; want no change", again, err)
	}
	if _, err := RotatePassword(ctx, pool, spec.Schema, spec.Owner); err != nil {
		t.Fatalf("rotating: %v", err)
	}
	dropped, err := Drop(ctx, pool, spec.Schema, spec.Owner)
	if err != nil || !dropped.SchemaDropped || len(dropped.RolesDropped) != 2 {
		t.Fatalf("Drop as a CREATEROLE admin: %+v, %v", dropped, err)
	}
}
