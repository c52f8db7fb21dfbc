package reembed_test

import (
	"errors"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/reembed"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// vectorDigest is a digest of every vector the tenant holds, by table.
func (f *fixture) vectorDigest() string {
	f.t.Helper()
	var d string
	err := f.admin.QueryRow(ctx(f.t), `SELECT md5(string_agg(v, ',' ORDER BY v)) FROM (
		SELECT md5(id::text || embedding::text) AS v FROM `+f.target.Schema+`.memories
		UNION ALL SELECT md5(seq::text || coalesce(embedding::text, '-')) FROM `+f.target.Schema+`.messages
		UNION ALL SELECT md5(id::text || embedding::text) FROM `+f.target.Schema+`.summaries
		UNION ALL SELECT md5(id::text || embedding::text) FROM `+f.target.Schema+`.episodes) AS x`).Scan(&d)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// reembedObjects counts the shadow columns, re-embed indexes and text
// triggers the tenant holds.
func (f *fixture) reembedObjects() (columns, indexes, triggers int64) {
	f.t.Helper()
	columns = f.count(`SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		WHERE c.relnamespace = '%[1]s'::regnamespace AND a.attname = 'embedding_next' AND NOT a.attisdropped AND c.relkind = 'r'`)
	indexes = f.count(`SELECT count(*) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
		WHERE c.relnamespace = '%[1]s'::regnamespace AND c.relname LIKE '%%reembed_todo_idx' AND i.indisvalid`)
	triggers = f.count(`SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE c.relnamespace = '%[1]s'::regnamespace AND t.tgname = 'reembed_text_changed'`)
	return columns, indexes, triggers
}

// TestReembedAbortRestores: an abort halfway through the fill drops every
// shadow column, index and trigger, leaves every old vector as it was and
// the state idle, and the old store searches as before; a re-embed to
// another embedder may begin afterwards.
func TestReembedAbortRestores(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(30)
	before := f.vectorDigest()
	to, emb := f.beginBuiltin(t, 768)
	if c, i, tr := f.reembedObjects(); c != 4 || i != 4 || tr != 2 {
		t.Fatalf("after Begin: %d shadow columns, %d valid todo indexes, %d text triggers; want 4, 4, 2", c, i, tr)
	}
	fl := reembed.NewFiller(f.login, f.target, to, emb)
	for range 2 {
		if n, done, err := fl.FillBatch(ctx(t), 10); err != nil || n != 10 || done {
			t.Fatalf("batch: %d, %v, %v; want 10 rows", n, done, err)
		}
	}
	if err := reembed.Abort(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	if c, i, tr := f.reembedObjects(); c != 0 || i != 0 || tr != 0 {
		t.Errorf("after Abort: %d shadow columns, %d todo indexes, %d text triggers; want none", c, i, tr)
	}
	if after := f.vectorDigest(); after != before {
		t.Error("the old vectors changed across Begin, a partial fill and Abort")
	}
	if dims, err := tenant.Dimensions(ctx(t), f.admin, f.target.Schema); err != nil || dims != 384 {
		t.Errorf("dimensions after Abort: %d, %v; want 384", dims, err)
	}
	st, err := reembed.ReadState(ctx(t), f.login, f.target)
	if err != nil || st.Phase != reembed.PhaseIdle || st.Next != (reembed.Embedder{}) || st.Filled != 0 || st.Current != f.from {
		t.Errorf("state after Abort: %+v, %v; want idle on %s", st, err, f.from)
	}
	// The Filler of the aborted re-embed stops.
	if _, _, err := fl.FillBatch(ctx(t), 10); !errors.Is(err, reembed.ErrNotFilling) {
		t.Errorf("a batch after Abort: %v, want ErrNotFilling", err)
	}
	hits, err := f.old.Search(ctx(t), memory.SearchRequest{Owner: "owner-1", Query: topic(4), Mode: "vector", TopK: 1})
	if err != nil || len(hits) != 1 || hits[0].Memory.Content != topic(4) || hits[0].VectorScore < 0.999 {
		t.Errorf("search under the old embedder after Abort: %+v, %v", hits, err)
	}
	if err := reembed.Abort(ctx(t), f.admin, f.target); err != nil {
		t.Errorf("a second Abort: %v, want nothing to do", err)
	}
	other, _ := builtin(t, 256)
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, other); err != nil {
		t.Fatalf("Begin after Abort: %v", err)
	}
	if p, err := reembed.ReadProgress(ctx(t), f.login, f.target); err != nil || p.LeftTotal != seeded.total() || p.Next != other {
		t.Errorf("progress of the new re-embed: %+v, %v; want %d rows left for %s", p, err, seeded.total(), other)
	}
}

// TestReembedSwitchRefusedWithRowsLeft: Switch refuses while a row has no
// new vector: halfway through the fill, after a memory added by a service
// that writes the old vector only, and after a memory whose text changed
// (the trigger clears its new vector); nothing changes on a refusal, and
// the switch goes through once the fill has caught up.
func TestReembedSwitchRefusedWithRowsLeft(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(20)
	to, emb := builtin(t, 768)
	if err := reembed.Switch(ctx(t), f.admin, f.target); !errors.Is(err, reembed.ErrNotFilling) {
		t.Errorf("Switch before Begin: %v, want ErrNotFilling", err)
	}
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, f.from); !errors.Is(err, reembed.ErrCurrent) {
		t.Errorf("Begin to the current embedder: %v, want ErrCurrent", err)
	}
	wrongDims := reembed.Embedder{Provider: "builtin", Model: "hash-384", Dimensions: 512}
	if err := reembed.Begin(ctx(t), f.admin, f.target, wrongDims, to); err == nil {
		t.Error("Begin from an embedder of 512 dimensions on 384-dimension vectors succeeded")
	}
	f.begin(t, to)
	other, otherEmb := builtin(t, 256)
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, other); !errors.Is(err, reembed.ErrBusy) {
		t.Errorf("Begin to another embedder during a re-embed: %v, want ErrBusy", err)
	}
	if _, _, err := reembed.NewFiller(f.login, f.target, other, otherEmb).FillBatch(ctx(t), 10); !errors.Is(err, reembed.ErrWrongEmbedder) {
		t.Errorf("a fill with another embedder: %v, want ErrWrongEmbedder", err)
	}
	fl := reembed.NewFiller(f.login, f.target, to, emb)
	if n, _, err := fl.FillBatch(ctx(t), 15); err != nil || n != 15 {
		t.Fatalf("batch: %d, %v", n, err)
	}
	refused := func(left int64, when string) {
		t.Helper()
		err := reembed.Switch(ctx(t), f.admin, f.target)
		if !errors.Is(err, reembed.ErrRowsLeft) {
			t.Fatalf("Switch %s: %v, want ErrRowsLeft", when, err)
		}
		p, perr := reembed.ReadProgress(ctx(t), f.login, f.target)
		if perr != nil || p.Phase != reembed.PhaseFilling || p.LeftTotal != left {
			t.Fatalf("progress after the refused switch %s: %+v, %v; want still filling, %d left", when, p, perr, left)
		}
		if dims, err := tenant.Dimensions(ctx(t), f.admin, f.target.Schema); err != nil || dims != 384 {
			t.Fatalf("dimensions after the refused switch %s: %d, %v; want 384", when, dims, err)
		}
	}
	refused(seeded.total()-15, "halfway")

	fill(t, fl, 15)
	if _, err := f.old.Add(ctx(t), memory.AddRequest{Owner: "owner-2", Content: "written by a service of the old embedder"}); err != nil {
		t.Fatal(err)
	}
	refused(1, "after an add without the new vector")
	fill(t, fl, 15)

	if n := f.sql(`UPDATE %[1]s.memories SET content = 'rewritten: ' || content WHERE content = $1`, topic(6)); n != 1 {
		t.Fatalf("rewrote %d memories, want 1", n)
	}
	refused(1, "after a rewrite of a memory's text")
	if got := fill(t, fl, 15); got != 1 {
		t.Errorf("the fill after the rewrite filled %d rows, want 1", got)
	}
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatalf("Switch once every row is filled: %v", err)
	}
	if n := f.checkVectors(emb, "memories", "content", "embedding"); n != seeded.memories+1 {
		t.Errorf("%d memories hold their text's new vector, want %d", n, seeded.memories+1)
	}
	if c, i, tr := f.reembedObjects(); c != 0 || i != 0 || tr != 0 {
		t.Errorf("after Switch: %d shadow columns, %d todo indexes, %d text triggers; want none", c, i, tr)
	}
	if _, _, err := fl.FillBatch(ctx(t), 10); !errors.Is(err, reembed.ErrNotFilling) {
		t.Errorf("a batch after Switch: %v, want ErrNotFilling", err)
	}
}

// TestReembedRefusedOnCitus: on a Citus coordinator Begin refuses
// (docs/decisions.md says why) and leaves the tenant as it was.
func TestReembedRefusedOnCitus(t *testing.T) {
	f := newFixtureOn(t, testenv.NewCitusDatabase(t))
	f.seed(3)
	to, _ := builtin(t, 768)
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, to); !errors.Is(err, reembed.ErrCitus) {
		t.Fatalf("Begin on Citus: %v, want ErrCitus", err)
	}
	st, err := reembed.ReadState(ctx(t), f.login, f.target)
	if err != nil || st.Phase != reembed.PhaseIdle {
		t.Errorf("state on Citus after the refusal: %+v, %v; want idle (migration 20 applied)", st, err)
	}
	if c, i, tr := f.reembedObjects(); c != 0 || i != 0 || tr != 0 {
		t.Errorf("after the refusal: %d shadow columns, %d todo indexes, %d text triggers; want none", c, i, tr)
	}
}
