package tenant

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// citusPool returns an admin pool on a fresh database of the Citus cluster
// of CITUS_URL (its coordinator).
func citusPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url := testenv.NewCitusDatabase(t)
	return testenv.NewPool(t, url, 4), url
}

func TestCitusProvisionDistributesSchema(t *testing.T) {
	pool, url := citusPool(t)
	ctx := testCtx(t)
	c, err := DetectCitus(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Installed || !c.Coordinator || len(c.Workers) < 2 {
		t.Fatalf("DetectCitus = %+v, want a coordinator with two workers", c)
	}
	schema := uniqueSchema(t, "citus_prov")
	res := mustProvision(t, pool, url, newSpec(schema, 8))
	if !res.Citus || !slices.Contains(c.Workers, res.Worker) {
		t.Fatalf("Result Citus=%v Worker=%q, want true and one of %v", res.Citus, res.Worker, c.Workers)
	}
	if ok, err := distributedSchema(ctx, pool, schema); err != nil || !ok {
		t.Fatalf("schema %s distributed = %v, %v; want true", schema, ok, err)
	}
	// Every table of the schema is a single-shard table of the schema's group.
	var local int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)`,
		schema).Scan(&local); err != nil || local != 0 {
		t.Fatalf("tables of %s that are not distributed: %d (%v)", schema, local, err)
	}
	p, err := SchemaPlacement(ctx, pool, schema)
	if err != nil || p.Worker != res.Worker || !p.Citus {
		t.Fatalf("SchemaPlacement = %+v, %v; want worker %s", p, err, res.Worker)
	}
	again, err := Provision(ctx, pool, newSpec(schema, 8))
	if err != nil || again.Changed() || again.Worker != res.Worker {
		t.Fatalf("second Provision: changes %v, worker %q, err %v; want none, %q", again.Changes, again.Worker, err, res.Worker)
	}
	// The login role works through the coordinator with its own password.
	login := loginConn(t, url, res, res.Password)
	if _, err := login.Exec(ctx, `INSERT INTO memories (id, owner_id, source, content, category, embedding) VALUES (gen_random_uuid(), 'o', 'user', 'x', 'project', '[1,0,0,0,0,0,0,0]')`); err != nil {
		t.Fatalf("insert as the login role through the coordinator: %v", err)
	}
	// An INSERT ... SELECT into a table with an identity column (a delete's
	// history row): Citus takes the identity value with nextval() on the
	// coordinator, which needs USAGE on the sequence.
	if _, err := login.Exec(ctx, `WITH upd AS (
			UPDATE memories SET active = false, deactivated_at = now() WHERE owner_id = 'o' RETURNING id, owner_id, content)
		INSERT INTO memory_history (memory_id, owner_id, action, actor, old_content)
		SELECT id, owner_id, 'delete', 'user', content FROM upd`); err != nil {
		t.Fatalf("a delete with its history row as the login role: %v", err)
	}
	// The operator's lease table stays a local table of the coordinator.
	if ok, err := distributedSchema(ctx, pool, ControlSchema); err != nil || ok {
		t.Fatalf("%s distributed = %v, %v; want false", ControlSchema, ok, err)
	}
}

// A schema provisioned before Citus was added to its database is made a
// distributed schema, tables and rows included, by the next provisioning;
// so is a schema whose provisioning stopped right after creating it.
func TestCitusProvisionDistributesAnExistingSchema(t *testing.T) {
	ctx := testCtx(t)
	early := uniqueSchema(t, "citus_early")
	var earlyRes *Result
	url := testenv.NewCitusDatabaseAfter(t, func(dbURL string) {
		pool := testenv.NewPool(t, dbURL, 2)
		earlyRes = mustProvision(t, pool, dbURL, newSpec(early, 8))
		if earlyRes.Citus {
			t.Fatal("provisioned before Citus, the result says Citus")
		}
		login := loginConn(t, dbURL, earlyRes, earlyRes.Password)
		if _, err := login.Exec(ctx, `INSERT INTO memories (id, owner_id, source, content, category, embedding)
			VALUES (gen_random_uuid(), 'o', 'user', 'kept', 'project', '[1,0,0,0,0,0,0,0]')`); err != nil {
			t.Fatal(err)
		}
		login.Close(ctx)
		pool.Close()
	})
	pool := testenv.NewPool(t, url, 4)
	res := mustProvision(t, pool, url, newSpec(early, 8))
	if res.Worker == "" || !slices.Contains(res.Changes, "distributed schema "+early+" (Citus)") {
		t.Fatalf("re-provisioning on Citus: worker %q, changes %v; want the schema distributed", res.Worker, res.Changes)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{early, "memories"}.Sanitize()+" WHERE content = 'kept'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the row written before Citus: %d, %v; want 1", n, err)
	}
	if _, err := loginConn(t, url, res, earlyRes.Password).Exec(ctx, `INSERT INTO memories (id, owner_id, source, content, category, embedding)
		VALUES (gen_random_uuid(), 'o', 'user', 'after', 'project', '[0,1,0,0,0,0,0,0]')`); err != nil {
		t.Fatalf("writing as the login role after the distribution: %v", err)
	}

	cut := uniqueSchema(t, "citus_cut")
	spec := newSpec(cut, 8)
	spec.FailAfter = func(step string) error {
		if step == "schema created" {
			return errors.New("stop")
		}
		return nil
	}
	dropRolesAfter(t, url, cut)
	if _, err := Provision(ctx, pool, spec); err == nil {
		t.Fatal("injected fault did not stop provisioning")
	}
	if ok, err := distributedSchema(ctx, pool, cut); err != nil || ok {
		t.Fatalf("schema distributed before the step that does it: %v, %v", ok, err)
	}
	if res := mustProvision(t, pool, url, newSpec(cut, 8)); res.Worker == "" {
		t.Fatalf("re-provisioning after a cut: no worker; changes %v", res.Changes)
	}
}

func TestCitusRefusesAWorkerConnection(t *testing.T) {
	_, url := citusPool(t)
	worker := testenv.NewPool(t, testenv.CitusWorkerURLs(t, url)[0], 2)
	schema := uniqueSchema(t, "citus_onworker")
	dropRolesAfter(t, url, schema)
	_, err := Provision(testCtx(t), worker, newSpec(schema, 8))
	if !errors.Is(err, ErrCitusUnsupported) || !strings.Contains(err.Error(), "worker node") {
		t.Fatalf("Provision on a worker: %v; want ErrCitusUnsupported naming the worker node", err)
	}
	var n int
	if err := worker.QueryRow(testCtx(t), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema left on the worker: %d (%v)", n, err)
	}
}

func TestCitusRefusesACoordinatorWithoutWorkers(t *testing.T) {
	ctx := testCtx(t)
	admin := testenv.CitusURL(t)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := "engram_test_noworkers_" + strings.ReplaceAll(uniqueSchema(t, "x"), "x_", "")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // on a connection of its own: conn is closed by then
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Logf("dropping %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	url := testenv.WithDatabase(t, admin, name)
	pool := testenv.NewPool(t, url, 2)
	for _, s := range []string{"CREATE EXTENSION citus", "CREATE EXTENSION vector"} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	schema := uniqueSchema(t, "citus_noworkers")
	dropRolesAfter(t, url, schema)
	_, err = Provision(ctx, pool, newSpec(schema, 8))
	if !errors.Is(err, ErrCitusUnsupported) || !strings.Contains(err.Error(), "no active worker") {
		t.Fatalf("Provision without workers: %v; want ErrCitusUnsupported naming the missing workers", err)
	}
	var roles int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname IN ($1, $2)`, OwnerRole(schema), LoginRole(schema)).Scan(&roles); err != nil || roles != 0 {
		t.Fatalf("roles left behind by a refusal: %d (%v)", roles, err)
	}
}

func TestCitusMoveSchema(t *testing.T) {
	pool, url := citusPool(t)
	ctx := testCtx(t)
	schema := uniqueSchema(t, "citus_move")
	spec := newSpec(schema, 8)
	res := mustProvision(t, pool, url, spec)
	// citus_schema_move copies with logical replication, which needs a
	// replica identity on every table that is updated or deleted from.
	var noKey []string
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relreplident = 'd'
		AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)`, schema)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		_ = rows.Scan(&r)
		noKey = append(noKey, r)
	}
	if rows.Close(); len(noKey) > 0 {
		t.Fatalf("tables without a primary key (a move would fail): %v", noKey)
	}
	c, err := DetectCitus(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	other := c.Workers[0]
	if other == res.Worker {
		other = c.Workers[1]
	}

	t.Run("refused for another runtime", func(t *testing.T) {
		_, err := MoveSchema(ctx, pool, MoveSpec{Schema: schema, Owner: Owner{UID: "someone-else", Namespace: "x", Name: "y"}, To: other})
		if !errors.Is(err, ErrOwnedByOther) {
			t.Fatalf("MoveSchema by another owner: %v; want ErrOwnedByOther", err)
		}
	})
	t.Run("refused to a node that is no worker", func(t *testing.T) {
		_, err := MoveSchema(ctx, pool, MoveSpec{Schema: schema, Owner: spec.Owner, To: "127.0.0.1:1"})
		if !errors.Is(err, ErrCitusUnsupported) || !strings.Contains(err.Error(), "not an active worker") {
			t.Fatalf("MoveSchema to 127.0.0.1:1: %v; want a refusal naming the workers", err)
		}
	})
	t.Run("refused while a migration holds the lease", func(t *testing.T) {
		held := make(chan struct{})
		release := make(chan struct{})
		go func() {
			_ = withTenantLock(ctx, pool, schema, func(*pgx.Conn) error {
				close(held)
				<-release
				return nil
			})
		}()
		<-held
		_, err := MoveSchema(ctx, pool, MoveSpec{Schema: schema, Owner: spec.Owner, To: other})
		close(release)
		if err == nil || !strings.Contains(err.Error(), "another operator has been provisioning") {
			t.Fatalf("MoveSchema beside a held lease: %v; want a refusal", err)
		}
	})
	t.Run("moves and reports", func(t *testing.T) {
		mv, err := MoveSchema(ctx, pool, MoveSpec{Schema: schema, Owner: spec.Owner, To: other})
		if err != nil || !mv.Moved || mv.From != res.Worker || mv.To != other {
			t.Fatalf("MoveSchema = %+v, %v; want a move %s -> %s", mv, err, res.Worker, other)
		}
		if p, err := SchemaPlacement(ctx, pool, schema); err != nil || p.Worker != other {
			t.Fatalf("placement after the move: %+v, %v", p, err)
		}
		again, err := MoveSchema(ctx, pool, MoveSpec{Schema: schema, Owner: spec.Owner, To: other})
		if err != nil || again.Moved {
			t.Fatalf("moving to where it is: %+v, %v; want nothing done", again, err)
		}
		// The tenant still provisions (migrations, grants) after the move.
		if r, err := Provision(ctx, pool, spec); err != nil || r.Worker != other {
			t.Fatalf("Provision after the move: %+v, %v", r, err)
		}
	})
}
