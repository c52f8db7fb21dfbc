package reembed_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/reembed"
	"github.com/engram-dev/engram/internal/tenant"
)

// TestReembedFillsAndSwitchesTo768: 384 → 768 dimensions with the builtin
// embedder. Begin counts every row with a vector as left (not the message
// stored without one); the fill, as the login role, gives each row the
// 768-dimension vector of its text; Switch makes them the tenant's in one
// step; a store of the new embedder then finds each memory by its text,
// and writes 768-dimension memories.
func TestReembedFillsAndSwitchesTo768(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(48)
	to, emb := f.beginBuiltin(t, 768)
	p, err := reembed.ReadProgress(ctx(t), f.login, f.target)
	if err != nil {
		t.Fatal(err)
	}
	if p.Phase != reembed.PhaseFilling || p.Current != f.from || p.Next != to || p.LeftTotal != seeded.total() ||
		p.Left["memories"] != seeded.memories || p.Left["messages"] != seeded.messages || p.Left["episodes"] != 1 || p.Left["summaries"] != 1 {
		t.Fatalf("progress after Begin: %+v; want filling %s → %s with %d rows left (%+v)", p, f.from, to, seeded.total(), seeded)
	}
	// Reads keep the old vectors: a search of the old store still works.
	if hits, err := f.old.Search(ctx(t), memory.SearchRequest{Owner: "owner-0", Query: topic(3), Mode: "vector"}); err != nil || len(hits) == 0 || hits[0].Memory.Content != topic(3) {
		t.Fatalf("search under the old embedder during the fill: %v, %v", hits, err)
	}

	filled := fill(t, reembed.NewFiller(f.login, f.target, to, emb), 16)
	if filled != seeded.total() {
		t.Errorf("the fill filled %d rows, want %d", filled, seeded.total())
	}
	p, err = reembed.ReadProgress(ctx(t), f.login, f.target)
	if err != nil || p.LeftTotal != 0 || p.Filled != seeded.total() {
		t.Fatalf("progress after the fill: %+v, %v; want 0 left, %d filled", p, err, seeded.total())
	}
	for _, c := range []struct {
		table, text string
		want        int64
	}{{"memories", "content", seeded.memories}, {"messages", "content", seeded.messages}, {"summaries", "content", 1}, {"episodes", "summary", 1}} {
		if n := f.checkVectors(emb, c.table, c.text, "embedding_next"); n != c.want {
			t.Errorf("%s: %d rows with a new vector, want %d", c.table, n, c.want)
		}
	}

	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	if dims, err := tenant.Dimensions(ctx(t), f.admin, f.target.Schema); err != nil || dims != 768 {
		t.Fatalf("dimensions after the switch: %d, %v; want 768", dims, err)
	}
	st, err := reembed.ReadState(ctx(t), f.login, f.target)
	if err != nil || st.Phase != reembed.PhaseIdle || st.Current != to || st.Next != (reembed.Embedder{}) || st.SwitchedAt == nil {
		t.Fatalf("state after the switch: %+v, %v; want idle on %s", st, err, to)
	}
	if n := f.count(`SELECT count(*) FROM pg_attribute WHERE attrelid = '%[1]s.memories'::regclass AND attname = 'embedding' AND attnotnull`); n != 1 {
		t.Error("memories.embedding is not NOT NULL after the switch")
	}
	if n := f.count(`SELECT count(*) FROM pg_attribute WHERE attrelid IN ('%[1]s.memories'::regclass, '%[1]s.messages'::regclass,
		'%[1]s.summaries'::regclass, '%[1]s.episodes'::regclass) AND attname = 'embedding_next' AND NOT attisdropped`); n != 0 {
		t.Errorf("%d shadow columns left after the switch", n)
	}
	if n := f.count(`SELECT count(*) FROM %[1]s.messages WHERE embedding IS NULL`); n != 1 {
		t.Errorf("%d messages without a vector after the switch, want the 1 stored without", n)
	}
	if n := f.checkVectors(emb, "memories", "content", "embedding"); n != seeded.memories {
		t.Errorf("%d memories hold the new vectors, want %d", n, seeded.memories)
	}
	// 768 > the covering index's size: the old one went with its column.
	if n := f.count(`SELECT count(*) FROM pg_class WHERE relname LIKE 'memories_active_vectors%%' AND relnamespace = '%[1]s'::regnamespace`); n != 0 {
		t.Errorf("%d covering indexes of memories after a switch to 768 dimensions, want 0", n)
	}

	now := f.store(emb)
	for _, i := range []int{0, 7, 29, 47} {
		hits, err := now.Search(ctx(t), memory.SearchRequest{Owner: ownerOf(i), Query: topic(i), Mode: "vector", TopK: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Memory.Content != topic(i) || hits[0].VectorScore < 0.999 {
			t.Errorf("vector search of %q under the new embedder: %+v; want it first with similarity 1", topic(i), hits)
		}
	}
	if _, err := now.Add(ctx(t), memory.AddRequest{Owner: "owner-1", Content: "a memory written after the switch"}); err != nil {
		t.Fatalf("add under the new embedder: %v", err)
	}
	if n := f.checkVectors(emb, "memories", "content", "embedding"); n != seeded.memories+1 {
		t.Errorf("%d memories hold 768-dimension vectors after an add, want %d", n, seeded.memories+1)
	}
}

func ownerOf(i int) string { return []string{"owner-0", "owner-1", "owner-2"}[i%3] }

// TestReembedSwitchKeepsTheCoveringIndex: a switch to 512 dimensions (they
// fit memories_active_vectors_idx) builds the covering index on the shadow
// column before the switch and gives it the old one's name.
func TestReembedSwitchKeepsTheCoveringIndex(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(12)
	to, emb := f.beginBuiltin(t, 512)
	if got := fill(t, reembed.NewFiller(f.login, f.target, to, emb), 64); got != seeded.total() {
		t.Errorf("filled %d rows, want %d", got, seeded.total())
	}
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	def := ""
	if err := f.admin.QueryRow(ctx(t), `SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
		WHERE i.indexrelid = to_regclass($1) AND i.indisvalid`, f.target.Schema+".memories_active_vectors_idx").Scan(&def); err != nil {
		t.Fatalf("the covering index after the switch: %v", err)
	}
	if want := "INCLUDE (embedding, id, expires_at)"; !contains(def, want) {
		t.Errorf("covering index %q does not %s", def, want)
	}
	if n := f.count(`SELECT count(*) FROM pg_class WHERE relnamespace = '%[1]s'::regnamespace
		AND (relname LIKE '%%reembed_todo%%' OR relname LIKE '%%next_idx')`); n != 0 {
		t.Errorf("%d re-embed indexes left after the switch", n)
	}
	now := f.store(emb)
	hits, err := now.Search(ctx(t), memory.SearchRequest{Owner: "owner-2", Query: topic(5), Mode: "vector", TopK: 1})
	if err != nil || len(hits) != 1 || hits[0].Memory.Content != topic(5) {
		t.Errorf("vector search under the 512 embedder: %+v, %v", hits, err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// cancelling embeds with inner and cancels the fill's context during its
// call number at (its vectors come back, the write is cancelled), counting
// the texts it was given.
type cancelling struct {
	memory.Embedder
	at     int64
	cancel context.CancelFunc
	calls  atomic.Int64
	texts  atomic.Int64
}

func (c *cancelling) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.texts.Add(int64(len(texts)))
	if c.calls.Add(1) == c.at {
		c.cancel()
	}
	return c.Embedder.Embed(ctx, texts)
}

// TestReembedResumesAfterACrash: the fill is cancelled during its third
// batch (the batch's write never commits), then a new Filler (a restarted
// pod, with no position) finishes: it embeds exactly the rows the first
// one did not store, and every row is filled once (the count in the
// reembed row is the number of rows).
func TestReembedResumesAfterACrash(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(90)
	to, emb := f.beginBuiltin(t, 768)
	c, cancel := context.WithCancel(ctx(t))
	first := &cancelling{Embedder: emb, at: 3, cancel: cancel}
	fl := reembed.NewFiller(f.login, f.target, to, first)
	var before int64
	var err error
	for range 10 {
		var n int64
		n, _, err = fl.FillBatch(c, 20)
		if err != nil {
			break
		}
		before += n
	}
	if !errors.Is(err, context.Canceled) || before != 40 {
		t.Fatalf("the first fill stopped with %v after %d rows; want context.Canceled after 2 batches of 20", err, before)
	}
	// Begin again (what a restarted operator does) resumes; it changes nothing.
	f.begin(t, to)
	p, err := reembed.ReadProgress(ctx(t), f.login, f.target)
	if err != nil || p.Filled != 40 || p.LeftTotal != seeded.total()-40 {
		t.Fatalf("progress after the crash: %+v, %v; want 40 filled, %d left", p, err, seeded.total()-40)
	}
	second := &cancelling{Embedder: emb}
	if got := fill(t, reembed.NewFiller(f.login, f.target, to, second), 20); got != seeded.total()-40 {
		t.Errorf("the resumed fill filled %d rows, want %d", got, seeded.total()-40)
	}
	if got := second.texts.Load(); got != seeded.total()-40 {
		t.Errorf("the resumed fill embedded %d texts, want only the %d rows left", got, seeded.total()-40)
	}
	p, err = reembed.ReadProgress(ctx(t), f.login, f.target)
	if err != nil || p.Filled != seeded.total() || p.LeftTotal != 0 {
		t.Fatalf("progress at the end: %+v, %v; want every one of %d rows filled once", p, err, seeded.total())
	}
	if n := f.checkVectors(emb, "memories", "content", "embedding_next"); n != seeded.memories {
		t.Errorf("%d memories hold their new vector, want %d", n, seeded.memories)
	}
}
