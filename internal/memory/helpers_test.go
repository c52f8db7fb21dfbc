package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory/modelapi"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// fixture is a provisioned tenant with a Store connected as its login role,
// plus an admin pool for seeding and inspecting rows.
type fixture struct {
	store    *Store
	admin    *pgxpool.Pool
	adminURL string // admin connection of the fixture's database
	loginURL string // the tenant's login role
	t        testing.TB
}

var schemaSeq atomic.Int64

// fixtureSettings is what fixture options change before provisioning.
type fixtureSettings struct {
	cfg      Config
	maxConns int32
	session  SessionSettings
	adminURL string // "" = a fresh database
	spec     func(*tenant.Spec)
}

type fixtureOption func(*fixtureSettings)

func withPolicy(mutate func(*Policy)) fixtureOption {
	return func(s *fixtureSettings) { mutate(&s.cfg.Policy) }
}

func withLLM(l LLM) fixtureOption { return func(s *fixtureSettings) { s.cfg.LLM = l } }

func withDims(d int) fixtureOption {
	return func(s *fixtureSettings) {
		e, _ := NewBuiltinEmbedder(d)
		s.cfg.Embedder = e
	}
}

// withEmbedder replaces the builtin embedder.
func withEmbedder(e Embedder) fixtureOption { return func(s *fixtureSettings) { s.cfg.Embedder = e } }

// withMaxConns sizes the tenant's pool (default 8).
func withMaxConns(n int32) fixtureOption { return func(s *fixtureSettings) { s.maxConns = n } }

// withLeaseTTL sets the maintenance lease's TTL.
func withLeaseTTL(d time.Duration) fixtureOption {
	return func(s *fixtureSettings) { s.cfg.JobLeaseTTL = d }
}

// withSession sets the session timeouts of the tenant's pool.
func withSession(sess SessionSettings) fixtureOption {
	return func(s *fixtureSettings) { s.session = sess }
}

// withSpec changes the tenant.Spec the fixture is provisioned with.
func withSpec(mutate func(*tenant.Spec)) fixtureOption {
	return func(s *fixtureSettings) { s.spec = mutate }
}

// inDatabaseOf provisions the tenant in the database of another fixture, so
// two tenants share one database as they do in production.
func inDatabaseOf(other *fixture) fixtureOption {
	return func(s *fixtureSettings) { s.adminURL = other.adminURL }
}

// newFixture provisions a tenant on a fresh database (internal/tenant, the
// same code the operator runs) and opens a Store on it.
func newFixture(t testing.TB, opts ...fixtureOption) *fixture {
	t.Helper()
	emb, _ := NewBuiltinEmbedder(384)
	set := fixtureSettings{cfg: Config{Policy: DefaultPolicy(), Embedder: emb, LLMTimeout: 2 * time.Second}, maxConns: 8}
	for _, o := range opts {
		o(&set)
	}
	if set.adminURL == "" {
		set.adminURL = testenv.NewDatabase(t)
	}
	admin := testenv.NewPool(t, set.adminURL, 4)
	cfg := set.cfg
	schema := fmt.Sprintf("engram_mem_%d_%d", time.Now().UnixNano()%1e6, schemaSeq.Add(1))
	spec := tenant.Spec{Schema: schema, Dimensions: cfg.Embedder.Dimensions(), Owner: testOwner(schema)}
	if set.spec != nil {
		set.spec(&spec)
	}
	res, err := tenant.Provision(ctx(t), admin, spec)
	if err != nil {
		t.Fatalf("provisioning: %v", err)
	}
	t.Cleanup(func() { _, _ = tenant.Drop(context.Background(), admin, schema, testOwner(schema)) })
	loginURL := testenv.WithUser(set.adminURL, res.LoginRole, res.Password)
	pool, err := NewPool(ctx(t), loginURL, set.maxConns, set.session)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg.Pool, cfg.Schema = pool, schema
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &fixture{store: s, admin: admin, adminURL: set.adminURL, loginURL: loginURL, t: t}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

// add adds a memory and fails the test on error.
func (f *fixture) add(req AddRequest) *AddResult {
	f.t.Helper()
	r, err := f.store.Add(ctx(f.t), req)
	if err != nil {
		f.t.Fatalf("Add(%+v): %v", req, err)
	}
	return r
}

// exec runs SQL as admin with %s replaced by the tenant's memories table.
func (f *fixture) exec(sql string, args ...any) int64 {
	f.t.Helper()
	tag, err := f.admin.Exec(ctx(f.t), fmt.Sprintf(sql, f.store.sql.memories), args...)
	if err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// count runs a COUNT query as admin, %s being the memories table.
// texts runs sql (one text column) as the admin and returns its rows.
func (f *fixture) texts(sql string, args ...any) []string {
	f.t.Helper()
	rows, err := f.admin.Query(ctx(f.t), sql, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	var n int64
	if err := f.admin.QueryRow(ctx(f.t), fmt.Sprintf(sql, f.store.sql.memories), args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (f *fixture) historyCount(id string) int64 {
	f.t.Helper()
	var n int64
	if err := f.admin.QueryRow(ctx(f.t), `SELECT count(*) FROM `+f.store.sql.history+` WHERE memory_id = $1`, id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// fakeChat is an OpenAI-compatible chat server in httptest whose answers
// the test scripts; it counts calls and keeps every request body.
type fakeChat struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reply  func(system, user string) (status int, content string)
	calls  atomic.Int64
	delay  time.Duration
	bodies []string
}

// sent returns every request body received so far.
func (f *fakeChat) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bodies)
}

func newFakeChat(t *testing.T, reply func(system, user string) (int, string)) *fakeChat {
	f := &fakeChat{reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeChat) serve(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	var req struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) != 2 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	status, content := f.reply(req.Messages[0].Content, req.Messages[1].Content)
	f.mu.Unlock()
	if status != http.StatusOK {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"message":"scripted failure"}}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}}}})
}

func (f *fakeChat) llm() LLM {
	return modelapi.NewLLM(LLMConfig{Endpoint: f.srv.URL + "/v1", Model: "fake"}, "test-key", f.srv.Client(), modelapi.WithBackoff(time.Millisecond))
}

// testOwner is the runtime a test tenant belongs to.
func testOwner(schema string) tenant.Owner {
	return tenant.Owner{UID: "test-" + schema, Namespace: "test-" + schema, Name: schema}
}
