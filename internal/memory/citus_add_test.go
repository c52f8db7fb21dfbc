package memory

import (
	"strings"
	"testing"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestCitusAddRunsOnTheTenantsWorker: on a Citus coordinator, every part of
// add's insert (the memory, its history row, the owner's row count) is a
// task on the tenant's worker. An INSERT ... SELECT of the new row pulled
// it to the coordinator and copied it back on a second connection, which
// made every add a two-phase commit and cost the add path through the
// service 2.6 times the CPU of plain PostgreSQL (issue 30's benchmark).
// Then it checks that an add writes its history row as before.
func TestCitusAddRunsOnTheTenantsWorker(t *testing.T) {
	f := newFixture(t, func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	p, err := tenant.SchemaPlacement(ctx(t), f.admin, f.store.core.Schema)
	if err != nil || !p.Citus || p.Worker == "" {
		t.Fatalf("the tenant is not a distributed schema: %+v, %v", p, err)
	}
	vec := make([]float32, 384)
	vec[0] = 1
	args := []any{core.NewID(), "alice", "", "", string(SourceAgent), "project", "Alice writes Go", 5, pgv.NewVector(vec),
		[]string{}, 0.0, map[string]any{"similarity": 0}, "test", "", nil, nil, "german"}
	rows, err := f.admin.Query(ctx(t), "EXPLAIN (COSTS OFF) "+f.store.InsertQuery(), args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	host, port, _ := strings.Cut(p.Worker, ":")
	worker := "host=" + host + " port=" + port + " "
	for _, bad := range []string{"INSERT ... SELECT", "pull to coordinator", "repartition"} {
		if strings.Contains(text, bad) {
			t.Errorf("the insert's plan on Citus has %q:\n%s", bad, text)
		}
	}
	for _, table := range []string{"Insert on memories_", "Insert on memory_history_", "memories_"} {
		if !strings.Contains(text, table) {
			t.Errorf("the insert's plan on Citus has no task %q:\n%s", table, text)
		}
	}
	if n := strings.Count(text, worker); n != 3 {
		t.Errorf("%d tasks on the tenant's worker %s, want 3 (memory, history, count):\n%s", n, p.Worker, text)
	}

	r := f.add(AddRequest{Owner: "alice", Content: "Alice writes Go and reviews Rust", Category: "project"})
	if r.Action != ActionAdded {
		t.Fatalf("action %s", r.Action)
	}
	if n := f.historyCount(r.Memory.ID); n != 1 {
		t.Errorf("%d history rows for the new memory, want 1", n)
	}
	var content, owner, action string
	if err := f.admin.QueryRow(ctx(t), `SELECT new_content, owner_id, action FROM `+f.store.sql.history+` WHERE memory_id = $1`, r.Memory.ID).
		Scan(&content, &owner, &action); err != nil {
		t.Fatal(err)
	}
	if content != r.Memory.Content || owner != "alice" || action != "add" {
		t.Errorf("history row %q %q %q, want the memory's content, alice, add", content, owner, action)
	}
}
