package reembed_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/reembed"
	"github.com/engram-dev/engram/internal/tenant"
)

// TestReembedChangesDimensionsBothWays: 384 → 768 → 384 with the builtin
// embedder, rows in every vector table. After each switch the four
// columns are of the new size, memories, messages, summaries and episodes
// answer searches of the new embedder (a query vector of the old size
// would fail: "different vector dimensions"), provisioning accepts the new
// size and refuses the old one; back at 384 the covering index of
// memories holds vector(384) again, and the index of inactive rows is there.
func TestReembedChangesDimensionsBothWays(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(24)
	b384 := f.from
	b768, emb768 := builtin(t, 768)
	f.reembedTo(b384, b768, emb768, seeded.total())
	f.checkColumns(768)
	if n := f.count(`SELECT count(*) FROM pg_class WHERE relname = 'memories_active_vectors_idx' AND relnamespace = '%[1]s'::regnamespace`); n != 0 {
		t.Errorf("a covering index of memories at 768 dimensions (over %d)", tenant.OwnerVectorsMaxDims)
	}
	f.checkSearches(f.store(emb768))
	f.checkProvision(768, 384)

	_, emb384 := builtin(t, 384)
	f.reembedTo(b768, b384, emb384, seeded.total())
	f.checkColumns(384)
	// The index's third attribute is its INCLUDE (embedding, ...) column
	// (its own attribute keeps the name it was built with, embedding_next).
	var def, typ string
	if err := f.admin.QueryRow(ctx(t), `SELECT pg_get_indexdef(i.indexrelid), format_type(a.atttypid, a.atttypmod)
		FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indexrelid AND a.attnum = 3
		WHERE i.indexrelid = to_regclass($1) AND i.indisvalid`, f.target.Schema+".memories_active_vectors_idx").Scan(&def, &typ); err != nil ||
		typ != "vector(384)" || !contains(def, "INCLUDE (embedding, id, expires_at)") {
		t.Errorf("the covering index back at 384 dimensions: %q holding %q (%v), want vector(384)", def, typ, err)
	}
	if n := f.count(`SELECT count(*) FROM pg_index WHERE indexrelid = to_regclass('%[1]s.memories_inactive_owner_idx') AND indisvalid`); n != 1 {
		t.Error("memories_inactive_owner_idx is missing back at 384 dimensions")
	}
	f.checkSearches(f.store(emb384))
	f.checkProvision(384, 768)
}

// TestReembedChangesDimensionsOfAnEmptyTenant: what the operator does for
// a change of dimensions on a tenant without a vector: Begin counts no
// row, Switch at once re-types the four columns, and a store of the new
// size writes and finds.
func TestReembedChangesDimensionsOfAnEmptyTenant(t *testing.T) {
	f := newFixture(t)
	b768, emb768 := builtin(t, 768)
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, b768); err != nil {
		t.Fatal(err)
	}
	p, err := reembed.ReadProgress(ctx(t), f.admin, f.target)
	if err != nil || p.LeftTotal != 0 || p.Filled != 0 || p.Phase != reembed.PhaseFilling {
		t.Fatalf("progress of an empty tenant after Begin: %+v, %v; want filling with nothing left", p, err)
	}
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	f.checkColumns(768)
	s := f.store(emb768)
	if _, err := s.Add(ctx(t), memory.AddRequest{Owner: "owner-0", Content: topic(3)}); err != nil {
		t.Fatalf("add of a 768-dimension memory: %v", err)
	}
	hits, err := s.Search(ctx(t), memory.SearchRequest{Owner: "owner-0", Query: topic(3), Mode: "vector", TopK: 1})
	if err != nil || len(hits) != 1 || hits[0].Memory.Content != topic(3) {
		t.Errorf("vector search at 768 dimensions: %+v, %v", hits, err)
	}
	f.checkProvision(768, 384)
}

// reembedTo runs a whole re-embed from → to and checks it filled rows.
func (f *fixture) reembedTo(from, to reembed.Embedder, emb memory.Embedder, rows int64) {
	f.t.Helper()
	if err := reembed.Begin(ctx(f.t), f.admin, f.target, from, to); err != nil {
		f.t.Fatal(err)
	}
	if got := fill(f.t, reembed.NewFiller(f.login, f.target, to, emb), 64); got != rows {
		f.t.Errorf("%s → %s filled %d rows, want %d", from, to, got, rows)
	}
	if err := reembed.Switch(ctx(f.t), f.admin, f.target); err != nil {
		f.t.Fatal(err)
	}
}

// checkColumns fails unless the embedding of the four vector tables is vector(dims).
func (f *fixture) checkColumns(dims int) {
	f.t.Helper()
	for _, table := range []string{"memories", "messages", "summaries", "episodes"} {
		var typ string
		if err := f.admin.QueryRow(ctx(f.t), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = to_regclass($1) AND attname = 'embedding' AND NOT attisdropped`, f.target.Schema+"."+table).Scan(&typ); err != nil ||
			typ != fmt.Sprintf("vector(%d)", dims) {
			f.t.Errorf("%s.embedding is %q (%v), want vector(%d)", table, typ, err, dims)
		}
	}
}

// checkSearches: memories, messages and summaries, and episodes answer s
// (the seed's rows, found by their text).
func (f *fixture) checkSearches(s *memory.Store) {
	f.t.Helper()
	c := ctx(f.t)
	hits, err := s.Search(c, memory.SearchRequest{Owner: "owner-1", Query: topic(7), Mode: "vector", TopK: 3})
	if err != nil || len(hits) == 0 || hits[0].Memory.Content != topic(7) || hits[0].VectorScore < 0.999 {
		f.t.Errorf("memory search: %+v, %v; want %q first with similarity 1", hits, err, topic(7))
	}
	hist, err := s.SearchHistory(c, memory.HistorySearchRequest{Owner: "owner-0", Query: "a summary of the first questions"})
	if err != nil || len(hist.Results) == 0 {
		f.t.Errorf("history search: %+v, %v", hist, err)
	}
	eps, err := s.SearchEpisodes(c, memory.EpisodeSearchRequest{Owner: "owner-0", Query: "an episode about questions"})
	if err != nil || len(eps.Results) != 1 || eps.Results[0].VectorScore < 0.999 {
		f.t.Errorf("episode search: %+v, %v; want the episode with similarity 1", eps, err)
	}
}

// checkProvision: provisioning the tenant again accepts the columns' size
// (dims) and refuses another (ErrDimensionsMismatch).
func (f *fixture) checkProvision(dims, other int) {
	f.t.Helper()
	schema := f.target.Schema
	owner := tenant.Owner{UID: "test-" + schema, Namespace: "test-" + schema, Name: schema}
	if _, err := tenant.Provision(ctx(f.t), f.admin, tenant.Spec{Schema: schema, Dimensions: dims, Owner: owner}); err != nil {
		f.t.Errorf("provisioning at %d dimensions after the switch: %v", dims, err)
	}
	if _, err := tenant.Provision(ctx(f.t), f.admin, tenant.Spec{Schema: schema, Dimensions: other, Owner: owner}); !errors.Is(err, tenant.ErrDimensionsMismatch) {
		f.t.Errorf("provisioning at %d dimensions after a switch to %d: %v; want ErrDimensionsMismatch", other, dims, err)
	}
}
