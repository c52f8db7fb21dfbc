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

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// adminPool returns a pool on a fresh database of the test server.
func adminPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url := testenv.NewDatabase(t)
	return testenv.NewPool(t, url, 4), url
}

// dropRolesAfter removes the cluster-wide roles of schema when the test ends
// (the test database is dropped, roles are not).
func dropRolesAfter(t *testing.T, adminURL, schema string) {
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), adminURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for _, r := range []string{LoginRole(schema), OwnerRole(schema)} {
			_, _ = conn.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{r}.Sanitize())
			_, _ = conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize())
		}
	})
}

func uniqueSchema(t *testing.T, base string) string {
	return fmt.Sprintf("%s_%d", base, time.Now().UnixNano()%1e9)
}

func mustProvision(t *testing.T, pool *pgxpool.Pool, url string, spec Spec) *Result {
	t.Helper()
	dropRolesAfter(t, url, spec.Schema)
	res, err := Provision(testCtx(t), pool, spec)
	if err != nil {
		t.Fatalf("Provision(%+v): %v", spec, err)
	}
	return res
}

// newSpec is a Spec owned by a runtime whose UID is derived from the schema,
// so every call for one schema names the same owner.
func newSpec(schema string, dims int) Spec {
	return Spec{Schema: schema, Dimensions: dims, Owner: Owner{UID: "uid-" + schema, Namespace: "ns-" + schema, Name: schema}}
}

func loginConn(t *testing.T, adminURL string, res *Result, password string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), testenv.WithUser(adminURL, res.LoginRole, password))
	if err != nil {
		t.Fatalf("logging in as %s: %v", res.LoginRole, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// mustRefuseLogin fails the test unless the login attempt that gave conn
// and err was refused by the role's CONNECTION LIMIT; what names the
// attempt.
func mustRefuseLogin(t *testing.T, what string, conn *pgx.Conn, err error) {
	t.Helper()
	if err == nil {
		_ = conn.Close(context.Background())
		t.Fatalf("%s: logged in; want the login refused by the role's CONNECTION LIMIT", what)
	}
	if !strings.Contains(err.Error(), "too many connections for role") {
		t.Fatalf("%s: %v; want \"too many connections for role\"", what, err)
	}
}

func TestProvisionIsIdempotent(t *testing.T) {
	pool, url := adminPool(t)
	spec := newSpec(uniqueSchema(t, "engram_idem"), 8)
	first := mustProvision(t, pool, url, spec)
	if !first.Changed() || first.Password == "" || first.Version != LatestVersion {
		t.Fatalf("first provision: changed=%v password set=%v version=%d (want %d)", first.Changed(), first.Password != "", first.Version, LatestVersion)
	}
	t.Logf("first run: %s", strings.Join(first.Changes, "; "))
	if first.ExtensionSchema != "public" {
		t.Errorf("extension schema = %q, want public", first.ExtensionSchema)
	}

	second, err := Provision(testCtx(t), pool, spec)
	if err != nil {
		t.Fatal(err)
	}
	if second.Changed() || second.Password != "" {
		t.Fatalf("second provision changed %v (password returned: %v); want no change", second.Changes, second.Password != "")
	}

	st, err := Status(testCtx(t), pool, spec.Schema)
	if err != nil || !st.UpToDate() || st.Current != LatestVersion {
		t.Fatalf("Status = %+v, %v", st, err)
	}
}

func TestProvisionConcurrently(t *testing.T) {
	pool, url := adminPool(t)
	spec := newSpec(uniqueSchema(t, "engram_conc"), 8)
	dropRolesAfter(t, url, spec.Schema)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	passwords := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			res, err := Provision(testCtx(t), pool, spec)
			errs <- err
			if err == nil && res.Password != "" {
				passwords <- res.Password
			}
		})
	}
	wg.Wait()
	close(errs)
	close(passwords)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Provision: %v", err)
		}
	}
	if n := len(passwords); n != 1 {
		t.Fatalf("%d runs created the login role, want exactly 1", n)
	}
}

func TestLoginRoleLeastPrivilege(t *testing.T) {
	pool, url := adminPool(t)
	a := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_a"), 3))
	b := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_b"), 3))
	connA := loginConn(t, url, a, a.Password)
	ctx := testCtx(t)

	own := pgx.Identifier{a.Schema, "memories"}.Sanitize()
	ownHist := pgx.Identifier{a.Schema, "memory_history"}.Sanitize()
	allowed := []string{
		`INSERT INTO ` + own + ` (id, owner_id, source, category, content, embedding) VALUES ('00000000-0000-7000-8000-000000000001', 'u', 'user', 'c', 'hello', '[1,0,0]')`,
		`SELECT count(*) FROM ` + own + ` WHERE embedding <=> '[1,0,0]' < 1`, // vector operators resolve via search_path
		`UPDATE ` + own + ` SET importance = 7`,
		`INSERT INTO ` + ownHist + ` (memory_id, owner_id, action, actor) VALUES ('00000000-0000-7000-8000-000000000001', 'u', 'add', 'user')`,
		`SELECT count(*) FROM memories`, // search_path = own schema
		`SELECT max(version) FROM ` + pgx.Identifier{a.Schema, "schema_migrations"}.Sanitize(),
		`DELETE FROM ` + ownHist,
		`DELETE FROM ` + own,
	}
	if serverMajor(t, pool) >= 17 {
		allowed = append(allowed, `VACUUM (ANALYZE) `+own) // MAINTAIN for the compact job
	}
	for _, sql := range allowed {
		if _, err := connA.Exec(ctx, sql); err != nil {
			t.Errorf("tenant A's own operation failed: %s: %v", sql, err)
		}
	}

	other := pgx.Identifier{b.Schema, "memories"}.Sanitize()
	denied := []string{
		`SELECT count(*) FROM ` + other,
		`INSERT INTO ` + other + ` (id, owner_id, source, category, content, embedding) VALUES ('00000000-0000-7000-8000-000000000002', 'u', 'user', 'c', 'x', '[1,0,0]')`,
		`UPDATE ` + other + ` SET importance = 1`,
		`DELETE FROM ` + other,
		`DROP TABLE ` + other,
		`CREATE TABLE ` + pgx.Identifier{b.Schema, "evil"}.Sanitize() + ` (id int)`,
		`CREATE TABLE public.evil (id int)`,
		`CREATE TABLE ` + pgx.Identifier{a.Schema, "evil"}.Sanitize() + ` (id int)`, // no DDL in its own schema either
		`ALTER TABLE ` + own + ` ADD COLUMN evil int`,
		`DROP TABLE ` + own,
		`TRUNCATE ` + own,
		`CREATE INDEX evil ON ` + own + ` (content)`,
		`INSERT INTO ` + pgx.Identifier{a.Schema, "schema_migrations"}.Sanitize() + ` (version, name) VALUES (99, 'evil')`,
		`DROP SCHEMA ` + pgx.Identifier{b.Schema}.Sanitize() + ` CASCADE`,
		`CREATE SCHEMA evil`,
		`ALTER ROLE ` + pgx.Identifier{b.LoginRole}.Sanitize() + ` PASSWORD 'x'`,
		`CREATE TEMP TABLE evil (id int)`,
		`SELECT * FROM ` + pgx.Identifier{ControlSchema, "provision_locks"}.Sanitize(),
		`COMMENT ON SCHEMA ` + pgx.Identifier{a.Schema}.Sanitize() + ` IS 'managed-by=engram; uid=forged'`,
	}
	for _, sql := range denied {
		_, err := connA.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "42501" && pgErr.Code != "42P01") {
			t.Errorf("tenant A could run (or got an unexpected error): %s: %v", sql, err)
		}
	}
}

func serverMajor(t *testing.T, pool *pgxpool.Pool) int {
	var v int
	if err := pool.QueryRow(testCtx(t), `SELECT current_setting('server_version_num')::int / 10000`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRotatePassword(t *testing.T) {
	pool, url := adminPool(t)
	res := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_rot"), 3))
	newPw, err := RotatePassword(testCtx(t), pool, res.Schema, newSpec(res.Schema, 3).Owner)
	if err != nil {
		t.Fatal(err)
	}
	if newPw == res.Password || len(newPw) < 40 {
		t.Fatalf("rotated password is not new and strong: %q", newPw)
	}
	if c, err := pgx.Connect(testCtx(t), testenv.WithUser(url, res.LoginRole, res.Password)); err == nil {
		c.Close(context.Background())
		t.Fatal("the old password still logs in after rotation")
	}
	loginConn(t, url, res, newPw)

	if _, err := RotatePassword(testCtx(t), pool, "engram_nobody_here", newSpec("engram_nobody_here", 3).Owner); err == nil {
		t.Fatal("rotating the password of a tenant that does not exist succeeded")
	}
}

func TestDrop(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	res := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_drop"), 3))
	got, err := Drop(ctx, pool, res.Schema, newSpec(res.Schema, 3).Owner)
	if err != nil {
		t.Fatal(err)
	}
	if !got.SchemaDropped || len(got.RolesDropped) != 2 {
		t.Fatalf("Drop = %+v, want schema and two roles dropped", got)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)`, []string{res.LoginRole, res.OwnerRole}).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d roles left after Drop (err %v)", n, err)
	}
	if again, err := Drop(ctx, pool, res.Schema, newSpec(res.Schema, 3).Owner); err != nil || again.SchemaDropped || len(again.RolesDropped) != 0 {
		t.Fatalf("second Drop = %+v, %v; want a no-op", again, err)
	}

	t.Run("refuses a foreign schema", func(t *testing.T) {
		foreign := uniqueSchema(t, "app_data")
		if _, err := pool.Exec(ctx, "CREATE SCHEMA "+foreign+"; CREATE TABLE "+foreign+".precious (id int)"); err != nil {
			t.Fatal(err)
		}
		if _, err := Drop(ctx, pool, foreign, newSpec(foreign, 3).Owner); !errors.Is(err, ErrNotManaged) {
			t.Fatalf("Drop of a foreign schema: %v, want ErrNotManaged", err)
		}
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+foreign+".precious").Scan(&n); err != nil {
			t.Fatalf("the foreign schema was harmed: %v", err)
		}
		if _, err := Provision(ctx, pool, newSpec(foreign, 3)); !errors.Is(err, ErrNotManaged) {
			t.Fatalf("Provision over a foreign schema: %v, want ErrNotManaged", err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)`, []string{OwnerRole(foreign), LoginRole(foreign)}).Scan(&n); err != nil || n != 0 {
			t.Fatalf("a refused Provision left %d roles behind (%v)", n, err)
		}
	})
}

func TestDimensionsAreFixed(t *testing.T) {
	pool, url := adminPool(t)
	res := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_dims"), 16))
	if d, err := Dimensions(testCtx(t), pool, res.Schema); err != nil || d != 16 {
		t.Fatalf("Dimensions = %d, %v", d, err)
	}
	if _, err := Provision(testCtx(t), pool, newSpec(res.Schema, 32)); !errors.Is(err, ErrDimensionsMismatch) {
		t.Fatalf("re-provisioning with other dimensions: %v, want ErrDimensionsMismatch", err)
	}
}

// TestUpgradeEqualsFreshInstall builds one schema at version 1 and upgrades
// it, installs another fresh, and compares their catalogs.
func TestUpgradeEqualsFreshInstall(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	fresh := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_fresh"), 8))

	oldSpec := newSpec(uniqueSchema(t, "engram_upg"), 8)
	dropRolesAfter(t, url, oldSpec.Schema)
	old, err := provisionTo(ctx, pool, oldSpec, 1)
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != 1 {
		t.Fatalf("old schema at version %d, want 1", old.Version)
	}
	upgraded, err := Provision(ctx, pool, oldSpec)
	if err != nil {
		t.Fatal(err)
	}
	if upgraded.Version != LatestVersion || !upgraded.Changed() {
		t.Fatalf("upgrade: version %d changes %v", upgraded.Version, upgraded.Changes)
	}
	a, b := catalog(t, pool, fresh.Schema), catalog(t, pool, oldSpec.Schema)
	if a != b {
		t.Fatalf("fresh install and upgrade differ:\nfresh:\n%s\nupgraded:\n%s", a, b)
	}
}

// catalog describes the tables, columns, indexes, constraints and grants of
// schema with the schema and role names replaced, for comparison.
func catalog(t *testing.T, pool *pgxpool.Pool, schema string) string {
	t.Helper()
	rows, err := pool.Query(testCtx(t), `
		SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind = 'r'
		UNION ALL
		SELECT 'idx ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = $1
		UNION ALL
		SELECT 'con ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = $1::regnamespace
		UNION ALL
		SELECT 'opt ' || c.relname || ' ' || coalesce(array_to_string(c.reloptions, ','), '')
		FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r'
		UNION ALL
		SELECT 'acl ' || c.relname || ' ' || coalesce(array_to_string(c.relacl, ','), '')
		FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r'
		ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(lines, "\n")
	return strings.ReplaceAll(out, schema, "SCHEMA")
}
