package memory

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// twoPhase reports the commands of sent that mean a write left the
// transaction's one connection to the worker: a two-phase commit.
func twoPhase(sent []string) []string {
	var bad []string
	for _, c := range sent {
		if strings.HasPrefix(c, "PREPARE TRANSACTION") || strings.HasPrefix(c, "COMMIT PREPARED") {
			bad = append(bad, c)
		}
	}
	return bad
}

// TestCitusHistoryWritesStayOnTheWorker: on Citus, every write that changes
// one memory and logs its history (a merge, an update, a supersede, a
// delete, a global delete) runs on the transaction's one connection to the
// tenant's worker, with a plain commit. An INSERT ... SELECT of the history
// row from the changed row made Citus pull the row to the coordinator and
// copy it back: a two-phase commit per write (issue 30, historyrow.go).
func TestCitusHistoryWritesStayOnTheWorker(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) {
		p.Categories = append(p.Categories, Category{Name: "company", Priority: 90, Global: true, Description: "facts about the company"})
	}), func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	s, rc := logRemoteCommands(t, f)
	c := ctx(t)
	check := func(what string, err error) {
		t.Helper()
		sent := rc.take()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(sent) == 0 {
			t.Fatalf("%s sent nothing to the workers (is citus.log_remote_commands on?)", what)
		}
		if bad := twoPhase(sent); len(bad) > 0 {
			t.Errorf("%s left the worker's one connection (%s); sent:\n%s", what, strings.Join(bad, ", "), strings.Join(sent, "\n"))
		}
	}

	a, err := s.Add(c, AddRequest{Owner: "ann", Content: "Ann deploys on Tuesdays", Category: "project"})
	check("add", err)
	_, err = s.Add(c, AddRequest{Owner: "ann", Content: "Ann deploys on Tuesdays", Category: "project"})
	check("a merge", err)
	text := "Ann deploys on Thursdays now"
	_, err = s.Update(c, UpdateRequest{Owner: "ann", ID: a.Memory.ID, Content: &text})
	check("an update", err)
	b, err := s.Add(c, AddRequest{Owner: "ann", Content: "Ann's team owns the billing service", Category: "project"})
	check("add", err)
	_, err = s.Supersede(c, "ann", a.Memory.ID, b.Memory.ID, SourceUser)
	check("a supersede", err)
	err = s.Delete(c, "ann", b.Memory.ID, SourceUser)
	check("a delete", err)
	g, err := s.Add(c, AddRequest{Owner: "ann", Content: "The company ships on Mondays", Category: "company", Source: SourceUser})
	check("a global add", err)
	err = s.DeleteGlobal(c, g.Memory.ID, SourceUser)
	check("a global delete", err)

	// The history rows are those an INSERT ... SELECT wrote.
	want := map[string][]string{
		a.Memory.ID: {"add||Ann deploys on Tuesdays", "merged|Ann deploys on Tuesdays|Ann deploys on Tuesdays",
			"update|Ann deploys on Tuesdays|Ann deploys on Thursdays now", "supersede|Ann deploys on Thursdays now|"},
		b.Memory.ID: {"add||Ann's team owns the billing service", "delete|Ann's team owns the billing service|"},
		g.Memory.ID: {"add||The company ships on Mondays", "delete|The company ships on Mondays|"},
	}
	for id, rows := range want {
		var got []string
		if err := f.admin.QueryRow(c, `SELECT array_agg(action || '|' || coalesce(old_content, '') || '|' || coalesce(new_content, '') ORDER BY id)
			FROM `+f.store.sql.history+` WHERE memory_id = $1 AND owner_id = (SELECT owner_id FROM `+f.store.sql.memories+` WHERE id = $1)`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(rows, "\n") {
			t.Errorf("history of %s:\n%s\nwant\n%s", id, strings.Join(got, "\n"), strings.Join(rows, "\n"))
		}
	}
}

// TestCitusEvictionStaysOnTheWorker: an add over the per-owner cap evicts
// on the transaction's one connection to the worker, with a plain commit,
// and the evicted memory keeps its one history row (historyrow.go: the
// eviction's history rows were an INSERT ... SELECT of the deleted rows).
func TestCitusEvictionStaysOnTheWorker(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxMemoriesPerOwner = 3 }),
		func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	s, rc := logRemoteCommands(t, f)
	c := ctx(t)
	var last *AddResult
	for _, text := range []string{"Eve likes green tea", "Eve runs marathons", "Eve speaks Finnish", "Eve collects vinyl records"} {
		r, err := s.Add(c, AddRequest{Owner: "eve", Content: text, Category: "project"})
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	sent := rc.take()
	if last.Evicted != 1 {
		t.Fatalf("the fourth add evicted %d, want 1", last.Evicted)
	}
	if bad := twoPhase(sent); len(bad) > 0 {
		t.Errorf("the eviction left the worker's one connection (%s); sent:\n%s", strings.Join(bad, ", "), strings.Join(sent, "\n"))
	}
	var rows []string
	r, err := f.admin.Query(c, `SELECT h.action || '|' || (h.details->>'category') || '|' || (h.details->>'wasActive') || '|' || (h.details->>'maxMemoriesPerOwner')
		FROM `+f.store.sql.history+` AS h WHERE NOT EXISTS (SELECT 1 FROM `+f.store.sql.memories+` AS m WHERE m.id = h.memory_id)`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var row string
		if err := r.Scan(&row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0] != HistoryEvict+"|project|true|3" {
		t.Errorf("history of the evicted memory: %q, want one row %q", rows, HistoryEvict+"|project|true|3")
	}
}
