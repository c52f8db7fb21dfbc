package reembed_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/reembed"
	"github.com/engram-dev/engram/internal/workload"
)

// flaky is an embedder that fails while down, and answers after delay.
type flaky struct {
	memory.Embedder
	down  atomic.Bool
	delay time.Duration
}

func (e *flaky) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.down.Load() {
		return nil, errors.New("the next embedder is down (test)")
	}
	if e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return e.Embedder.Embed(ctx, texts)
}

// outcomes counts dual writes by outcome.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) count(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
}

func (o *outcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

// dualStore opens a store of the old embedder that knows next.
func (f *fixture) dualStore(id reembed.Embedder, next memory.Embedder, timeout time.Duration, o *outcomes) *memory.Store {
	f.t.Helper()
	s, err := memory.New(memory.Config{Pool: f.login, Schema: f.target.Schema, Policy: memory.DefaultPolicy(),
		Embedder: f.oldEmbedder(), LLMTimeout: 2 * time.Second,
		Next: &memory.NextEmbedder{ID: id, Embedder: next, Timeout: timeout, Count: o.count}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(s.Close)
	return s
}

// nextOf reads embedding_next IS NULL of the memory with content.
func (f *fixture) nextIsNull(table, text, content string) bool {
	f.t.Helper()
	return f.count(`SELECT count(*) FROM %[1]s.`+table+` WHERE `+text+` = $1 AND embedding_next IS NULL`, content) == 1
}

// TestDualWritesMemories: during the fill toward 256 dimensions, a store
// that knows the next embedder writes each add's next vector (an insert,
// a merge of an exact duplicate, a batch) with the old one; with the next
// embedder down, or slower than its bound, the add succeeds with
// embedding_next NULL, counted, and the fill gives it its vector. A store
// whose next embedder is not the re-embed's writes none. After the switch,
// a store of the new embedder that still names it as next writes as usual.
func TestDualWritesMemories(t *testing.T) {
	f := newFixture(t)
	f.seed(6)
	to, toEmb := f.beginBuiltin(t, 256)
	next := &flaky{Embedder: toEmb}
	var o outcomes
	s := f.dualStore(to, next, time.Second, &o)

	add := func(s *memory.Store, content string) {
		t.Helper()
		if _, err := s.Add(ctx(t), memory.AddRequest{Owner: "owner-1", Content: content}); err != nil {
			t.Fatalf("add %q: %v", content, err)
		}
	}
	add(s, "the dual write of a brand new memory")
	add(s, "the dual write of a brand new memory") // an exact duplicate: merged in place
	if _, err := s.AddBatch(ctx(t), []memory.AddRequest{{Owner: "owner-2", Content: "a batch's first dual write"},
		{Owner: "owner-2", Content: "a batch's second dual write about kites"}}); err != nil {
		t.Fatal(err)
	}
	// An update of a memory's content (PATCH) writes its new text's.
	seeded := f.count(`SELECT count(*) FROM %[1]s.memories WHERE owner_id = 'owner-0'`)
	var id string
	if err := f.admin.QueryRow(ctx(t), fmt.Sprintf(`SELECT id::text FROM %s.memories WHERE owner_id = 'owner-0' LIMIT 1`, f.target.Schema)).Scan(&id); err != nil || seeded == 0 {
		t.Fatalf("a seeded memory: %v", err)
	}
	changed := "rewritten by an update during the fill"
	if _, err := s.Update(ctx(t), memory.UpdateRequest{Owner: "owner-0", ID: id, Content: &changed}); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM %[1]s.memories WHERE embedding_next IS NOT NULL`); n != 4 {
		t.Errorf("%d memories with a next vector after 3 dual writes and an update, want 4", n)
	}
	if n := f.checkVectors(toEmb, "memories", "content", "embedding_next"); n != 4 {
		t.Errorf("%d memories checked against the next embedder, want 4", n)
	}
	if got := o.get("written"); got != 5 {
		t.Errorf("%d dual writes counted written, want 5 (%v)", got, o.n)
	}

	// The next embedder down: the add succeeds without its next vector.
	next.down.Store(true)
	add(s, "written while the next embedder is down")
	if !f.nextIsNull("memories", "content", "written while the next embedder is down") {
		t.Error("a memory written while the next embedder is down has a next vector")
	}
	if o.get("failed") != 1 {
		t.Errorf("outcomes %v, want 1 failed", o.n)
	}
	next.down.Store(false)
	// Slower than its bound: the same, and the write does not wait for it.
	slow := f.dualStore(to, &flaky{Embedder: toEmb, delay: 3 * time.Second}, 100*time.Millisecond, &o)
	start := time.Now()
	add(slow, "written while the next embedder is slow")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("an add waited %s for a slow next embedder bounded at 100 ms", d)
	}
	if !f.nextIsNull("memories", "content", "written while the next embedder is slow") || o.get("timeout") != 1 {
		t.Errorf("a memory written while the next embedder is slow: next vector present or not counted (%v)", o.n)
	}
	// Another next embedder than the re-embed's: no dual write.
	_, other := builtin(t, 128)
	add(f.dualStore(reembed.Embedder{Provider: "builtin", Model: "hash-128", Dimensions: 128}, other, time.Second, &o),
		"written by a store that names another next embedder")
	if !f.nextIsNull("memories", "content", "written by a store that names another next embedder") {
		t.Error("a store naming another next embedder wrote a next vector")
	}

	// The fill gives the rows left their vectors; every next vector is the
	// next embedder's of its text.
	fill(t, reembed.NewFiller(f.login, f.target, to, toEmb), 16)
	if n := f.count(`SELECT count(*) FROM %[1]s.memories WHERE embedding_next IS NULL`); n != 0 {
		t.Errorf("%d memories without a next vector after the fill", n)
	}
	f.checkVectors(toEmb, "memories", "content", "embedding_next")
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}

	// After the switch: a store of the new embedder naming it as next too
	// (a configuration not yet rendered again) writes as any store does.
	after, err := memory.New(memory.Config{Pool: f.login, Schema: f.target.Schema, Policy: memory.DefaultPolicy(),
		Embedder: toEmb, Next: &memory.NextEmbedder{ID: to, Embedder: toEmb, Count: o.count}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(after.Close)
	before := o.get("written")
	add(after, "written after the switch")
	if n := f.checkVectors(toEmb, "memories", "content", "embedding"); n < 10 {
		t.Errorf("%d memories hold the new vectors after the switch", n)
	}
	if o.get("written") != before {
		t.Errorf("a write after the switch counted as a dual write (%v)", o.n)
	}
}

// TestDualWritesConversation: during the fill, the messages of an append,
// the summaries of a compaction and the episode of an ended session,
// written by a store that knows the next embedder, hold the next
// embedder's vectors of their texts; with the next embedder down an append
// succeeds with none, and the fill gives them theirs.
func TestDualWritesConversation(t *testing.T) {
	f := newFixture(t)
	f.seed(3)
	to, toEmb := f.beginBuiltin(t, 256)
	next := &flaky{Embedder: toEmb}
	var o outcomes
	s := f.dualStore(to, next, time.Second, &o)
	c := ctx(t)
	if _, err := s.CreateSession(c, memory.CreateSessionRequest{Owner: "owner-1", ID: "d1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.AppendTurn(c, memory.AppendRequest{Owner: "owner-1", SessionID: "d1", Messages: []memory.TurnMessage{
			{Role: "user", Content: fmt.Sprintf("Dual question %d: how long does the %s take to build?", i, topic(i))},
			{Role: "assistant", Content: fmt.Sprintf("Dual answer %d: about %d days for the %s.", i, i+2, topic(i+5))},
		}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if n := f.count(`SELECT count(*) FROM %[1]s.messages WHERE session_id = 'd1' AND embedding_next IS NOT NULL`); n != 8 {
		t.Errorf("%d of the 8 appended messages have a next vector", n)
	}
	res, err := s.CompactSession(c, memory.CompactSessionRequest{Owner: "owner-1", SessionID: "d1", Mode: memory.CompactFull, Force: true})
	if err != nil || len(res.Roots) == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	summaries := f.count(`SELECT count(*) FROM %[1]s.summaries WHERE session_id = 'd1'`)
	if n := f.count(`SELECT count(*) FROM %[1]s.summaries WHERE session_id = 'd1' AND embedding_next IS NOT NULL`); summaries == 0 || n != summaries {
		t.Errorf("%d of the %d summaries of the compaction have a next vector", n, summaries)
	}
	if end, err := s.EndSession(c, memory.EndSessionRequest{Owner: "owner-1", SessionID: "d1"}); err != nil || end.Episode == nil {
		t.Fatalf("ending the session: %+v, %v", end, err)
	}
	if n := f.count(`SELECT count(*) FROM %[1]s.episodes WHERE session_id = 'd1' AND embedding_next IS NOT NULL`); n != 1 {
		t.Errorf("%d episodes of the ended session have a next vector, want 1", n)
	}
	for _, tc := range []struct{ table, text string }{{"messages", "content"}, {"summaries", "content"}, {"episodes", "summary"}} {
		if n := f.checkVectors(toEmb, tc.table, tc.text, "embedding_next"); n == 0 {
			t.Errorf("no %s checked against the next embedder", tc.table)
		}
	}
	if want := 8 + int(summaries) + 1; o.get("written") != want {
		t.Errorf("outcomes %v, want %d written", o.n, want)
	}

	// The next embedder down: the append succeeds, its messages without.
	next.down.Store(true)
	if _, err := s.CreateSession(c, memory.CreateSessionRequest{Owner: "owner-1", ID: "d2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendTurn(c, memory.AppendRequest{Owner: "owner-1", SessionID: "d2", Messages: []memory.TurnMessage{
		{Role: "user", Content: "asked while the next embedder is down"}}}); err != nil {
		t.Fatalf("append with the next embedder down: %v", err)
	}
	if !f.nextIsNull("messages", "content", "asked while the next embedder is down") || o.get("failed") != 1 {
		t.Errorf("a message appended with the next embedder down: a next vector, or not counted (%v)", o.n)
	}
	fill(t, reembed.NewFiller(f.login, f.target, to, toEmb), 16)
	if n := f.count(`SELECT count(*) FROM %[1]s.messages WHERE embedding IS NOT NULL AND embedding_next IS NULL`); n != 0 {
		t.Errorf("%d messages without a next vector after the fill", n)
	}
	f.checkVectors(toEmb, "messages", "content", "embedding_next")
}

// TestDualWritesFromConfig: the service's config names the next embedder
// (reembed.next), and a store opened from it (workload.Open, as `manager
// serve` opens it) dual-writes while the tenant fills toward it, counting
// through StoreParams.CountDualWrite.
func TestDualWritesFromConfig(t *testing.T) {
	f := newFixture(t)
	to := memory.ReembedNamed(memory.ProviderBuiltin, "", 256)
	f.begin(t, to)
	cfg := &memory.ServiceConfig{Schema: f.target.Schema, Policy: memory.DefaultPolicy(),
		Embedding: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: 384},
		Reembed:   &memory.ReembedConfig{Next: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: 256}, Timeout: "1s"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var o outcomes
	tn, err := workload.Open(ctx(t), workload.StoreParams{Config: cfg, DatabaseURL: f.logURL, MaxConns: 2, CountDualWrite: o.count})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.Close)
	if _, err := tn.Store.Add(ctx(t), memory.AddRequest{Owner: "owner-1", Content: "configured to write both vectors"}); err != nil {
		t.Fatal(err)
	}
	_, toEmb := builtin(t, 256)
	if f.nextIsNull("memories", "content", "configured to write both vectors") || o.get("written") != 1 {
		t.Fatalf("a store opened from a config naming the next embedder wrote no next vector (%v)", o.n)
	}
	if n := f.checkVectors(toEmb, "memories", "content", "embedding_next"); n != 1 {
		t.Errorf("%d next vectors checked, want 1", n)
	}
}

// TestDualWritesWhenTheReembedEnds: a store that last read "filling" (its
// cache) writes after an abort, then after a new begin toward another
// embedder of the same size: each write succeeds, without a next vector
// (counted stale), never the wrong embedder's vector in the new column.
func TestDualWritesWhenTheReembedEnds(t *testing.T) {
	f := newFixture(t)
	f.seed(3)
	to, toEmb := f.beginBuiltin(t, 256)
	var o outcomes
	s := f.dualStore(to, toEmb, time.Second, &o)
	add := func(content string) {
		t.Helper()
		if _, err := s.Add(ctx(t), memory.AddRequest{Owner: "owner-1", Content: content}); err != nil {
			t.Fatalf("add %q: %v", content, err)
		}
	}
	add("written while filling")
	if err := reembed.Abort(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	add("written after the abort")
	if o.get("stale") != 1 || o.get("written") != 1 {
		t.Errorf("outcomes %v, want 1 written, 1 stale", o.n)
	}
	// Filling again (a store that just read it), then aborted and begun
	// toward another embedder of 256 dimensions behind its cache.
	f.begin(t, to)
	s = f.dualStore(to, toEmb, time.Second, &o)
	add("written while filling again")
	if err := reembed.Abort(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	other := reembed.Embedder{Provider: "builtin", Model: "another-256", Dimensions: 256}
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, other); err != nil {
		t.Fatal(err)
	}
	add("written while filling toward another embedder")
	if !f.nextIsNull("memories", "content", "written while filling toward another embedder") || o.get("stale") != 2 {
		t.Errorf("a store of another next embedder wrote into the new re-embed's column (%v)", o.n)
	}
}
