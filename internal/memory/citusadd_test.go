package memory

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// remoteCommands is a pool of the tenant's login role whose sessions log
// the commands the coordinator sends to the workers (citus.log_remote_commands,
// reported to the client as notices "issuing ...").
type remoteCommands struct {
	mu   sync.Mutex
	sent []string
}

func (r *remoteCommands) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// logRemoteCommands returns a Store of f's tenant on a pool that records
// the commands its sessions send to the workers.
func logRemoteCommands(t *testing.T, f *fixture) (*Store, *remoteCommands) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(f.loginURL)
	if err != nil {
		t.Fatal(err)
	}
	rc := &remoteCommands{}
	SessionSettings{}.Apply(cfg.ConnConfig.RuntimeParams)
	cfg.ConnConfig.RuntimeParams["citus.log_remote_commands"] = "on"
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if msg, ok := strings.CutPrefix(n.Message, "issuing "); ok {
			rc.mu.Lock()
			rc.sent = append(rc.sent, msg)
			rc.mu.Unlock()
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := Config{Policy: f.store.core.Policy, Embedder: f.store.core.Embedder, Pool: pool, Schema: f.store.core.Schema}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, rc
}

// TestCitusAddIsOneCallOnTheWorker: on Citus, a fresh add through the
// coordinator is one command to the tenant's worker (the delegated call of
// add_memory), with no BEGIN, no COMMIT and no two-phase commit; it used to
// be seven round trips (BEGIN, the owner's lock, the lookup, the insert's
// three parts, COMMIT), which held an add to 0.36-0.49 of plain
// PostgreSQL's throughput (issue 30). What it stores is what an add stores
// on plain PostgreSQL: the memory, its history row (with the similarity and
// the redactions), the owner's row count for the per-owner cap.
func TestCitusAddIsOneCallOnTheWorker(t *testing.T) {
	f := newFixture(t, func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	s, rc := logRemoteCommands(t, f)
	c := ctx(t)
	if _, err := s.Add(c, AddRequest{Owner: "alice", Content: "Alice writes Go", Category: "project"}); err != nil {
		t.Fatal(err)
	}
	rc.take() // the first add also probes for add_memory
	r, err := s.Add(c, AddRequest{Owner: "alice", Content: "Alice reviews Rust on Fridays, key sk-abcdefghijklmnopqrstuvwxyz123456", Category: "project"})
	if err != nil {
		t.Fatal(err)
	}
	sent := rc.take()
	t.Logf("sent: %q", sent)
	if len(sent) != 1 || !strings.Contains(sent[0], "add_memory(") {
		t.Fatalf("an add sent %d commands to the workers, want 1 (the call of add_memory):\n%s", len(sent), strings.Join(sent, "\n"))
	}
	if r.Action != ActionAdded || r.OwnerRows() != 2 || r.Similarity <= 0 || r.Similarity >= 1 {
		t.Errorf("add: action %s, owner rows %d, similarity %v; want added, 2, the neighbour's", r.Action, r.OwnerRows(), r.Similarity)
	}
	var action, actor, content string
	var sim float64
	var redacted int
	if err := f.admin.QueryRow(c, `SELECT action, actor, new_content, (details->>'similarity')::float8,
			jsonb_array_length(coalesce(details->'redactions', '[]'))
		FROM `+f.store.sql.history+` WHERE memory_id = $1`, r.Memory.ID).Scan(&action, &actor, &content, &sim, &redacted); err != nil {
		t.Fatal(err)
	}
	if action != "add" || actor != string(SourceAgent) || content != r.Memory.Content || sim != r.Similarity || redacted != len(r.Redactions) || redacted == 0 {
		t.Errorf("history row %s %s %q similarity %v, %d redactions; want add, agent, the memory's content, %v, %d",
			action, actor, content, sim, redacted, r.Similarity, len(r.Redactions))
	}
}

// TestCitusAddDecidesOnANeighbourInATransaction: an add whose neighbour is
// identical (or close enough to merge or arbitrate) is not written by
// add_memory, which returns no row; the engine's own transaction merges it,
// as on plain PostgreSQL.
func TestCitusAddDecidesOnANeighbourInATransaction(t *testing.T) {
	f := newFixture(t, func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	first := f.add(AddRequest{Owner: "bob", Content: "Bob prefers tabs", Category: "project"})
	again := f.add(AddRequest{Owner: "bob", Content: "Bob prefers tabs", Category: "project"})
	if again.Action != ActionMerged || again.Memory.ID != first.Memory.ID {
		t.Fatalf("the same text again: %s of %s, want merged into %s", again.Action, again.Memory.ID, first.Memory.ID)
	}
	if n := f.historyCount(first.Memory.ID); n != 2 {
		t.Errorf("%d history rows, want 2 (add, merge)", n)
	}
	var rows int
	if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+f.store.sql.memories).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d memories, want 1", rows)
	}
}

// TestCitusReadsAreOneCommandOnTheWorker: a vector search and a hybrid
// search, each repeated, send one command each to the tenant's worker, and
// a context one per statement it runs (its memories, then the owner's
// constraints and profile documents): no transaction (BEGIN, SET LOCAL,
// COMMIT) around a read, so the coordinator's hop costs one round trip a
// statement and nothing of the engine's adds to it (issue 30: what is left
// of the searches' gap is Citus planning each statement on the coordinator
// and again on the worker). Access statistics are recorded later, in
// batches; the tenant's text search configuration is read at most once per
// core.TextSearchTTL, whichever search comes then (not counted here).
func TestCitusReadsAreOneCommandOnTheWorker(t *testing.T) {
	f := newFixture(t, func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	s, rc := logRemoteCommands(t, f)
	c := ctx(t)
	for _, text := range []string{"Dana writes Go", "Dana reviews Rust on Fridays", "Dana prefers tabs"} {
		if _, err := s.Add(c, AddRequest{Owner: "dana", Content: text, Category: "project"}); err != nil {
			t.Fatal(err)
		}
	}
	reads := []struct {
		name     string
		commands int
		read     func() error
	}{
		{"vector search", 1, func() error {
			_, err := s.Search(c, SearchRequest{Owner: "dana", Query: "which languages", Mode: SearchVector})
			return err
		}},
		{"hybrid search", 1, func() error {
			_, err := s.Search(c, SearchRequest{Owner: "dana", Query: "which languages", Mode: SearchHybrid})
			return err
		}},
		{"context", 3, func() error {
			_, err := s.Context(c, ContextRequest{Owner: "dana", Query: "which languages"})
			return err
		}},
	}
	for _, r := range reads {
		for i := range 3 {
			rc.take()
			if err := r.read(); err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			sent := slices.DeleteFunc(rc.take(), func(cmd string) bool {
				return strings.HasPrefix(cmd, "SELECT config, ") && strings.Contains(cmd, ".text_search_")
			})
			for _, cmd := range sent {
				for _, tx := range []string{"BEGIN", "SET ", "COMMIT", "ROLLBACK", "PREPARE"} {
					if strings.HasPrefix(cmd, tx) {
						t.Errorf("%s #%d sent %q to a worker, want its statements only", r.name, i, cmd)
					}
				}
			}
			if len(sent) != r.commands {
				t.Errorf("%s #%d sent %d commands to the workers, want %d:\n%s", r.name, i, len(sent), r.commands, strings.Join(sent, "\n"))
			}
		}
	}
}
