package tenant

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// largeObjectCalls create a large object each, one per creator function
// PUBLIC may execute by default (lo_import of a server file is a
// superuser's already).
var largeObjectCalls = []string{
	"SELECT lo_creat(-1)",
	"SELECT lo_create(0)",
	"SELECT lo_from_bytea(0, '\\x00'::bytea)",
}

// TestTenantCannotStoreLargeObjects: large objects live in pg_largeobject,
// outside every schema, so a tenant that may create them stores any
// amount of data past its quotas, where no retention or drop of its schema
// reaches (issue 26, LOW). Provisioning revokes the creator functions from
// PUBLIC in Engram's database: A's login role gets "permission denied"
// from each and owns no large object; the admin (a superuser) still
// creates them, as another application granted them would; the revoke is
// done once. On a Citus cluster the same holds on every worker, where A
// may log in directly.
func TestTenantCannotStoreLargeObjects(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	a := newSpec(uniqueSchema(t, "engram_largeobj"), 3)
	resA := mustProvision(t, pool, url, a)
	wantLargeObjectsRefused(t, "A", loginConn(t, url, resA, resA.Password), resA.LoginRole)
	var oid uint32
	if err := pool.QueryRow(ctx, "SELECT lo_from_bytea(0, '\\x00'::bytea)").Scan(&oid); err != nil {
		t.Fatalf("the admin creating a large object: %v", err)
	}
	if _, err := pool.Exec(ctx, "SELECT lo_unlink($1)", oid); err != nil {
		t.Fatal(err)
	}
	if testenv.OnCitus() {
		for _, w := range testenv.CitusWorkerURLs(t, url) {
			conn, err := pgx.Connect(ctx, testenv.WithUser(w, resA.LoginRole, resA.Password))
			if err != nil {
				t.Logf("worker %s refuses A's login: %v", testenv.HostPort(w), err) // isolated as well
				continue
			}
			wantLargeObjectsRefused(t, "A on worker "+testenv.HostPort(w), conn, resA.LoginRole)
			_ = conn.Close(context.Background())
		}
	}
	if again, err := Provision(ctx, pool, a); err != nil || again.Changed() || len(again.Warnings) > 0 {
		t.Fatalf("re-provisioning A: %+v, %v; want no change and no warning", again, err)
	}
}

func wantLargeObjectsRefused(t *testing.T, who string, conn *pgx.Conn, role string) {
	t.Helper()
	ctx := testCtx(t)
	wantEachRefused(t, who, conn, largeObjectCalls)
	var owned int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_largeobject_metadata WHERE lomowner = $1::regrole`, role).Scan(&owned); err != nil {
		t.Fatal(err)
	}
	if owned > 0 {
		t.Errorf("%s owns %d large objects", who, owned)
	}
}
