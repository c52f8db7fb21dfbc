package tenant

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// citusPair provisions tenants a and b on one Citus database and puts a row
// into b's memories; it returns a's login URL on the coordinator.
type citusPair struct {
	pool       *pgxpool.Pool
	url        string
	a, b       *Result
	aPassword  string
	bShardName string // the name of b's memories shard on its worker
}

func newCitusPair(t *testing.T) citusPair {
	t.Helper()
	pool, url := citusPool(t)
	ctx := testCtx(t)
	p := citusPair{pool: pool, url: url}
	p.a = mustProvision(t, pool, url, newSpec(uniqueSchema(t, "citus_iso_a"), 8))
	p.aPassword = p.a.Password
	p.b = mustProvision(t, pool, url, newSpec(uniqueSchema(t, "citus_iso_b"), 8))
	b := loginConn(t, url, p.b, p.b.Password)
	if _, err := b.Exec(ctx, `INSERT INTO memories (id, owner_id, source, content, category, embedding)
		VALUES (gen_random_uuid(), 'owner-b', 'user', 'secret of b', 'project', '[1,0,0,0,0,0,0,0]')`); err != nil {
		t.Fatalf("writing b's row: %v", err)
	}
	if err := pool.QueryRow(ctx, `SELECT 'memories_' || shardid FROM pg_dist_shard
		WHERE logicalrelid = to_regclass($1)`, pgx.Identifier{p.b.Schema, "memories"}.Sanitize()).Scan(&p.bShardName); err != nil {
		t.Fatalf("reading b's shard name: %v", err)
	}
	return p
}

// wantDenied checks that err is a refusal (insufficient privilege or, for a
// name the node does not have, undefined table), never rows.
func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "42501" && pgErr.Code != "42P01") {
		t.Fatalf("%s: %v; want permission denied (42501) or no such relation (42P01)", what, err)
	}
	t.Logf("%s: refused as wanted: %s %s", what, pgErr.Code, pgErr.Message)
}

func TestCitusIsolationThroughCoordinator(t *testing.T) {
	p := newCitusPair(t)
	ctx := testCtx(t)
	a := loginConn(t, p.url, p.a, p.aPassword)
	var n int
	err := a.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{p.b.Schema, "memories"}.Sanitize()).Scan(&n)
	wantDenied(t, "a reads b.memories through the coordinator", err)
	_, err = a.Exec(ctx, "INSERT INTO "+pgx.Identifier{p.b.Schema, "memories"}.Sanitize()+
		` (id, owner_id, source, content, category, embedding) VALUES (gen_random_uuid(), 'x', 'user', 'x', 'project', '[1,0,0,0,0,0,0,0]')`)
	wantDenied(t, "a writes b.memories through the coordinator", err)
	// Citus's own way to run a statement on every worker runs it as a's
	// role there, where a has no privilege on b's shard either.
	var ok bool
	var result string
	err = a.QueryRow(ctx, `SELECT success, result FROM run_command_on_workers($1) ORDER BY success DESC LIMIT 1`,
		"SELECT count(*) FROM "+pgx.Identifier{p.b.Schema, p.bShardName}.Sanitize()).Scan(&ok, &result)
	if err == nil && ok {
		t.Fatalf("run_command_on_workers as a read b's shard: %s", result)
	}
	t.Logf("run_command_on_workers as a: success=%v result=%q err=%v", ok, result, err)
}

func TestCitusIsolationThroughShardName(t *testing.T) {
	p := newCitusPair(t)
	ctx := testCtx(t)
	a := loginConn(t, p.url, p.a, p.aPassword)
	var n int
	err := a.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{p.b.Schema, p.bShardName}.Sanitize()).Scan(&n)
	wantDenied(t, "a reads b's shard "+p.bShardName+" by name through the coordinator", err)
}

func TestCitusIsolationOnWorkerDirectly(t *testing.T) {
	p := newCitusPair(t)
	ctx := testCtx(t)
	for _, w := range testenv.CitusWorkerURLs(t, p.url) {
		conn, err := pgx.Connect(ctx, testenv.WithUser(w, p.a.LoginRole, p.aPassword))
		if err != nil {
			// A worker that does not let the tenant log in at all isolates too.
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || (pgErr.Code != "28P01" && pgErr.Code != "28000") {
				t.Fatalf("connecting to worker %s as a: %v; want success or an authentication failure", w, err)
			}
			t.Logf("worker %s refuses a's login: %s", w, pgErr.Message)
			continue
		}
		defer conn.Close(context.Background())
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{p.b.Schema, p.bShardName}.Sanitize()).Scan(&n)
		wantDenied(t, "a reads b's shard on worker "+w, err)
		err = conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{p.b.Schema, "memories"}.Sanitize()).Scan(&n)
		wantDenied(t, "a reads b.memories on worker "+w, err)
	}
	// b's shard does hold the row on its worker: the refusals above are
	// about privileges, not about an empty or missing table.
	var rows int
	worker := testenv.NewPool(t, workerURL(t, p.url, p.b.Worker), 1)
	if err := worker.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{p.b.Schema, p.bShardName}.Sanitize()).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("b's shard on %s as the admin: %d rows, %v; want 1", p.b.Worker, rows, err)
	}
}

// workerURL returns the admin URL of the worker host:port of the cluster of url.
func workerURL(t *testing.T, url, hostPort string) string {
	t.Helper()
	for _, w := range testenv.CitusWorkerURLs(t, url) {
		if testenv.HostPort(w) == hostPort {
			return w
		}
	}
	t.Fatalf("no worker %s", hostPort)
	return ""
}
