package reembed_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/reembed"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

var schemaSeq atomic.Int64

// builtin is the builtin embedder of dims, named as the re-embed records it.
func builtin(t testing.TB, dims int) (reembed.Embedder, memory.Embedder) {
	t.Helper()
	emb, err := memory.NewBuiltinEmbedder(dims)
	if err != nil {
		t.Fatal(err)
	}
	return reembed.Embedder{Provider: "builtin", Model: fmt.Sprintf("hash-%d", dims), Dimensions: dims}, emb
}

// fixture is a provisioned 384-dimension tenant: the admin pool (Begin,
// Switch, Abort take the owner role on it), the login role's pool (the
// fill's, as the service's) and a memory store of the old embedder.
type fixture struct {
	t             testing.TB
	admin, login  *pgxpool.Pool
	dbURL, logURL string
	target        reembed.Target
	old           *memory.Store
	from          reembed.Embedder
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	testenv.SkipOnCitus(t, "a re-embed on Citus is refused (reembed.ErrCitus); TestReembedRefusedOnCitus covers it")
	return newFixtureOn(t, testenv.NewDatabase(t))
}

// begin begins the re-embed of f's tenant toward to.
func (f *fixture) begin(t testing.TB, to reembed.Embedder) {
	t.Helper()
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, to); err != nil {
		t.Fatal(err)
	}
}

// beginBuiltin begins the re-embed of f's tenant toward the builtin
// embedder of dims dimensions, and returns it (builtin).
func (f *fixture) beginBuiltin(t testing.TB, dims int) (reembed.Embedder, memory.Embedder) {
	t.Helper()
	to, emb := builtin(t, dims)
	f.begin(t, to)
	return to, emb
}

// newFixtureOn is newFixture on the database of dbURL.
func newFixtureOn(t testing.TB, dbURL string) *fixture {
	t.Helper()
	admin := testenv.NewPool(t, dbURL, 4)
	schema := fmt.Sprintf("engram_reembed_%d_%d", time.Now().UnixNano()%1e6, schemaSeq.Add(1))
	owner := tenant.Owner{UID: "test-" + schema, Namespace: "test-" + schema, Name: schema}
	res, err := tenant.Provision(ctx(t), admin, tenant.Spec{Schema: schema, Dimensions: 384, Owner: owner})
	if err != nil {
		t.Fatalf("provisioning: %v", err)
	}
	t.Cleanup(func() { _, _ = tenant.Drop(context.Background(), admin, schema, owner) })
	logURL := testenv.WithUser(dbURL, res.LoginRole, res.Password)
	login, err := memory.NewPool(ctx(t), logURL, 4, memory.SessionSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(login.Close)
	f := &fixture{t: t, admin: admin, login: login, dbURL: dbURL, logURL: logURL,
		target: reembed.Target{Schema: schema, Owner: res.OwnerRole, Login: res.LoginRole}}
	var emb memory.Embedder
	f.from, emb = builtin(t, 384)
	f.old = f.store(emb)
	return f
}

// oldEmbedder is the tenant's embedder before the re-embed.
func (f *fixture) oldEmbedder() memory.Embedder {
	f.t.Helper()
	_, emb := builtin(f.t, f.from.Dimensions)
	return emb
}

// store opens a memory store of the tenant with emb.
func (f *fixture) store(emb memory.Embedder) *memory.Store {
	f.t.Helper()
	s, err := memory.New(memory.Config{Pool: f.login, Schema: f.target.Schema, Policy: memory.DefaultPolicy(), Embedder: emb, LLMTimeout: 2 * time.Second})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(s.Close)
	return s
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

// seeded counts what seed wrote, by table, with a vector.
type seeded struct{ memories, messages, summaries, episodes int64 }

func (s seeded) total() int64 { return s.memories + s.messages + s.summaries + s.episodes }

// seed writes n memories over 3 owners (distinct topics, so none merges),
// a session of 6 messages through the service, one message without a
// vector, a summary and an episode.
func (f *fixture) seed(n int) seeded {
	f.t.Helper()
	c := ctx(f.t)
	for i := range n {
		owner := fmt.Sprintf("owner-%d", i%3)
		if _, err := f.old.Add(c, memory.AddRequest{Owner: owner, Content: topic(i)}); err != nil {
			f.t.Fatalf("add %d: %v", i, err)
		}
	}
	if _, err := f.old.CreateSession(c, memory.CreateSessionRequest{Owner: "owner-0", ID: "s1"}); err != nil {
		f.t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.old.AppendTurn(c, memory.AppendRequest{Owner: "owner-0", SessionID: "s1", Messages: []memory.TurnMessage{
			{Role: "user", Content: fmt.Sprintf("question %d about the %s", i, topic(i))},
			{Role: "assistant", Content: fmt.Sprintf("answer %d about the %s", i, topic(i+1))},
		}}); err != nil {
			f.t.Fatal(err)
		}
	}
	f.sql(`INSERT INTO %[1]s.messages (owner_id, session_id, seq, role, content, tokens)
		VALUES ('owner-0', 's1', 100, 'user', 'stored without a vector', 4)`)
	f.sql(`INSERT INTO %[1]s.summaries (id, owner_id, session_id, depth, content, earliest_seq, latest_seq,
		earliest_at, latest_at, tokens, descendant_count, method, embedding)
		SELECT gen_random_uuid(), 'owner-0', 's1', 0, 'a summary of the first questions', 1, 4, now(), now(), 6, 4,
			'extractive', embedding FROM %[1]s.messages WHERE seq = 1`)
	f.sql(`INSERT INTO %[1]s.episodes (id, owner_id, session_id, summary, method, user_turns, started_at, ended_at, embedding)
		SELECT gen_random_uuid(), 'owner-0', 's1', 'an episode about questions', 'extractive', 3, now(), now(), embedding
		FROM %[1]s.messages WHERE seq = 1`)
	return seeded{memories: int64(n), messages: 6, summaries: 1, episodes: 1}
}

var topics = []string{"harbour", "violin", "glacier", "espresso", "tax return", "marathon", "orchid", "telescope",
	"sourdough", "chess opening", "kayak", "volcano", "saxophone", "bonsai", "lighthouse", "origami"}

// topic is a distinct sentence for i.
func topic(i int) string {
	return fmt.Sprintf("note %d: the %s and the %s of week %d", i, topics[i%len(topics)], topics[(i/len(topics)+3)%len(topics)], i)
}

// sql runs a statement as admin, %[1]s being the tenant's schema.
func (f *fixture) sql(stmt string, args ...any) int64 {
	f.t.Helper()
	tag, err := f.admin.Exec(ctx(f.t), fmt.Sprintf(stmt, f.target.Schema), args...)
	if err != nil {
		f.t.Fatalf("%s: %v", stmt, err)
	}
	return tag.RowsAffected()
}

// count runs a count as admin, %[1]s being the tenant's schema.
func (f *fixture) count(query string, args ...any) int64 {
	f.t.Helper()
	var n int64
	if err := f.admin.QueryRow(ctx(f.t), fmt.Sprintf(query, f.target.Schema), args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// fill runs batches of n until done and returns the rows filled.
func fill(t testing.TB, fl *reembed.Filler, n int) int64 {
	t.Helper()
	var total int64
	for range 10_000 {
		filled, done, err := fl.FillBatch(ctx(t), n)
		if err != nil {
			t.Fatalf("fill: %v", err)
		}
		total += filled
		if done {
			return total
		}
	}
	t.Fatal("the fill did not end in 10,000 batches")
	return 0
}

// checkVectors fails unless every row of table with a vector in column
// holds exactly emb's vector of its text, and returns how many it checked.
func (f *fixture) checkVectors(emb memory.Embedder, table, text, column string) int64 {
	f.t.Helper()
	rows, err := f.login.Query(ctx(f.t), fmt.Sprintf(`SELECT %s, %s FROM %s.%s WHERE %s IS NOT NULL`, text, column, f.target.Schema, table, column))
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		var content string
		var v pgv.Vector
		if err := rows.Scan(&content, &v); err != nil {
			f.t.Fatal(err)
		}
		want, err := emb.Embed(ctx(f.t), []string{content})
		if err != nil {
			f.t.Fatal(err)
		}
		if d := distance(v.Slice(), want[0]); len(v.Slice()) != emb.Dimensions() || d > 1e-5 {
			f.t.Errorf("%s.%s of %q: %d dimensions at cosine distance %.6f from the embedder's %d", table, column, content, len(v.Slice()), d, emb.Dimensions())
		}
		n++
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// distance is the cosine distance of a and b (1 when their sizes differ).
func distance(a, b []float32) float64 {
	if len(a) != len(b) {
		return 1
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return 1 - dot/math.Sqrt(na*nb)
}
