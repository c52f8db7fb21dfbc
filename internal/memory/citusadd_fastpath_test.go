package memory

import (
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// citusFastPath is the DEBUG2 message of Citus's planner for a statement
// it plans as a "fast path" query (one table, no CTE, no subquery), whose
// local plan it keeps on the worker.
const citusFastPath = "Distributed planning for a fast-path router query"

// TestCitusAddLookupIsFastPathOnTheWorker: add_memory's neighbour lookup
// (migration 21) runs on the tenant's worker as single-table statements
// that Citus plans on its fast path: the four candidates, the pick among
// them and the owner's row count. Migration 15's lookup was one statement
// with a CTE, which Citus planned again on every call (one fast-path
// statement in all: the count); a pgbench of the call measured 0.1-1.0 ms
// (median 0.4) less worker CPU per add and 7-33 % more adds per second
// with the split lookup (issue 30, docs/scale-out.md). The call finds the owner's memory as the
// neighbour (an arbitration threshold of -2 makes any neighbour one to
// decide on), so it writes nothing and returns no row.
func TestCitusAddLookupIsFastPathOnTheWorker(t *testing.T) {
	f := newFixture(t, func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	c := ctx(t)
	first := f.add(AddRequest{Owner: "alice", Content: "Alice writes Go", Category: "project"})
	p, err := tenant.SchemaPlacement(c, f.admin, f.store.core.Schema)
	if err != nil || !p.Citus || p.Worker == "" {
		t.Fatalf("the tenant is not a distributed schema: %+v, %v", p, err)
	}
	var workerURL string
	for _, u := range testenv.CitusWorkerURLs(t, f.adminURL) {
		if strings.Contains(u, "@"+p.Worker+"/") {
			workerURL = u
		}
	}
	if workerURL == "" {
		t.Fatalf("no worker URL for the tenant's worker %s", p.Worker)
	}
	cfg, err := pgx.ParseConfig(workerURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.RuntimeParams["lock_timeout"], cfg.RuntimeParams["statement_timeout"] = "5s", "30s"
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(c)
	vecs, err := f.store.core.Embedder.Embed(c, []string{"Alice writes Go every day"})
	if err != nil {
		t.Fatal(err)
	}
	call := `SELECT count(*) FROM ` + pgx.Identifier{f.store.core.Schema, "add_memory"}.Sanitize() +
		`($1, $2, '', '', 'agent', 'project', $3, 5, $4, '{}', 0, '{}', 'test', '', -2, 86400, $5, '5s')`
	if _, err := conn.Exec(c, `SET client_min_messages = debug2`); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second call runs on the plans the first made
		mu.Lock()
		notices = nil
		mu.Unlock()
		var n int
		if err := conn.QueryRow(c, call, core.NewID(), "alice", "Alice writes Go every day", pgv.NewVector(vecs[0]), int64(1)<<50+int64(i)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("add_memory returned %d rows, want none (the neighbour %s is one to decide on)", n, first.Memory.ID)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Count(strings.Join(notices, "\n"), citusFastPath); got < 5 {
		t.Errorf("%d statements of add_memory planned on Citus's fast path, want at least 5 (four candidates and the pick); the planner said:\n%s",
			got, strings.Join(notices, "\n"))
	}
	var rows int
	if err := f.admin.QueryRow(c, `SELECT count(*) FROM `+f.store.sql.memories).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d memories after the calls, want 1 (the lookup found the neighbour and wrote nothing)", rows)
	}
}
