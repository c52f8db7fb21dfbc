package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestCitusTemplateCopiesAreClusters: the databases NewCitusDatabase copies
// from the per-cluster template behave as clusters set up by hand: a grant
// made through the coordinator reaches the worker (a role reads through the
// coordinator), citus_schema_move moves a schema to the other worker with
// its rows, two copies share nothing, and the template itself stays sealed
// (no connections, a template) on every node.
func TestCitusTemplateCopiesAreClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := testenv.NewCitusDatabase(t), testenv.NewCitusDatabase(t)
	pool := newVectorPool(t, a)
	role := fmt.Sprintf("tpl_reader_%d", time.Now().UnixNano()%1e9)
	for _, s := range []string{
		`CREATE SCHEMA moved`,
		`SELECT citus_schema_distribute('moved')`,
		`CREATE TABLE moved.items (id int PRIMARY KEY)`,
		`INSERT INTO moved.items SELECT generate_series(1, 100)`,
		`CREATE ROLE ` + role + ` LOGIN PASSWORD 'tpl-reader'`,
		`GRANT USAGE ON SCHEMA moved TO ` + role,
		`GRANT SELECT ON moved.items TO ` + role,
	} {
		mustExec(ctx, t, pool, s)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = testenv.Exec(c, a, `DROP SCHEMA moved CASCADE`)
		_ = testenv.Exec(c, a, `DROP ROLE `+role) // through the coordinator: from the workers too
	})
	var rows int
	if err := newVectorPool(t, testenv.WithUser(a, role, "tpl-reader")).QueryRow(ctx, `SELECT count(*) FROM moved.items`).Scan(&rows); err != nil || rows != 100 {
		t.Fatalf("the granted role reads %d rows through the coordinator, %v; want 100", rows, err)
	}
	var from, to int
	if err := pool.QueryRow(ctx, `SELECT s.nodeport, (SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 AND nodeport <> s.nodeport LIMIT 1)
		FROM citus_shards s WHERE s.table_name = 'moved.items'::regclass`).Scan(&from, &to); err != nil {
		t.Fatalf("reading the placement: %v", err)
	}
	mustExec(ctx, t, pool, fmt.Sprintf(`SELECT citus_schema_move('moved', '127.0.0.1', %d, shard_transfer_mode := 'block_writes')`, to))
	var now int
	if err := pool.QueryRow(ctx, `SELECT s.nodeport, (SELECT count(*) FROM moved.items) FROM citus_shards s WHERE s.table_name = 'moved.items'::regclass`).Scan(&now, &rows); err != nil {
		t.Fatalf("after the move: %v", err)
	}
	if now != to || rows != 100 {
		t.Errorf("after moving from worker :%d to :%d: on :%d with %d rows; want :%d with 100", from, to, now, rows, to)
	}
	var inB bool
	if err := newVectorPool(t, b).QueryRow(ctx, `SELECT to_regnamespace('moved') IS NOT NULL`).Scan(&inB); err != nil || inB {
		t.Errorf("the other copy has schema moved: %v, %v", inB, err)
	}
	for _, node := range append(testenv.CitusWorkerURLs(t, a), a) {
		conn, err := pgx.Connect(ctx, testenv.WithDatabase(t, node, "postgres"))
		if err != nil {
			t.Fatal(err)
		}
		var sealed int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE 'engram_citus_template_%' AND datistemplate AND NOT datallowconn`).Scan(&sealed)
		conn.Close(ctx)
		if err != nil || sealed < 1 {
			t.Errorf("%s: %d sealed templates, %v; want at least 1", testenv.HostPort(node), sealed, err)
		}
	}
}
