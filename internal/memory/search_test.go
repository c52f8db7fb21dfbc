package memory

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

func hitContents(hits []SearchHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Memory.Content
	}
	return out
}

func TestSearchModesAndScope(t *testing.T) {
	f := newFixture(t)
	for _, r := range []AddRequest{
		{Owner: "ann", Content: "Ann prefers dark mode in every editor", Category: "preference"},
		{Owner: "ann", Content: "Ann is allergic to peanuts", Category: "identity", Source: SourceUser},
		{Owner: "ann", Content: "Ann works on the payments team", Category: "project"},
		{Owner: "ann", Agent: "travel-bot", Content: "Ann likes aisle seats on long flights", Category: "preference"},
		{Owner: "ann", Agent: "travel-bot", Session: "s1", Content: "Ann is flying to Lisbon on Friday", Category: "contextual"},
		{Owner: "ann", Agent: "code-bot", Content: "Ann writes Go and some Rust", Category: "project"},
		{Owner: "ben", Content: "Ben prefers dark mode too", Category: "preference"},
	} {
		f.add(r)
	}
	search := func(req SearchRequest) []SearchHit {
		t.Helper()
		hits, err := f.store.Search(ctx(t), req)
		if err != nil {
			t.Fatalf("Search(%+v): %v", req, err)
		}
		return hits
	}

	t.Run("vector", func(t *testing.T) {
		hits := search(SearchRequest{Owner: "ann", Query: "dark mode editor", Mode: SearchVector, TopK: 3})
		if len(hits) != 3 || hits[0].Memory.Content != "Ann prefers dark mode in every editor" {
			t.Fatalf("vector hits = %v", hitContents(hits))
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Fatalf("not ordered by score: %+v", hits)
			}
		}
	})
	t.Run("text", func(t *testing.T) {
		hits := search(SearchRequest{Owner: "ann", Query: "peanut allergies", Mode: SearchText})
		if len(hits) != 1 || !strings.Contains(hits[0].Memory.Content, "peanuts") || hits[0].TextScore <= 0 {
			t.Fatalf("text hits = %v", hitContents(hits))
		}
	})
	t.Run("hybrid combines", func(t *testing.T) {
		hits := search(SearchRequest{Owner: "ann", Query: "payments team"})
		if hits[0].Memory.Content != "Ann works on the payments team" {
			t.Fatalf("hybrid hits = %v", hitContents(hits))
		}
		h := hits[0]
		want := 0.6*h.VectorScore + 0.2*h.TextScore + 0.2*h.DecayScore
		if d := h.Score - want; d > 1e-9 || d < -1e-9 || h.DecayScore <= 0.99 {
			t.Fatalf("hybrid score %f, want %f (decay %f)", h.Score, want, h.DecayScore)
		}
	})
	t.Run("owner scoped", func(t *testing.T) {
		for _, h := range search(SearchRequest{Owner: "ben", Query: "dark mode", TopK: 100}) {
			if h.Memory.Owner != "ben" {
				t.Fatalf("ben sees %+v", h.Memory)
			}
		}
	})
	t.Run("agent and session scope", func(t *testing.T) {
		got := hitContents(search(SearchRequest{Owner: "ann", Agent: "travel-bot", Query: "Ann", TopK: 100}))
		joined := strings.Join(got, "|")
		if len(got) != 5 || strings.Contains(joined, "Rust") {
			t.Fatalf("travel-bot sees %v; want owner-level + travel-bot memories, not code-bot's", got)
		}
		got = hitContents(search(SearchRequest{Owner: "ann", Agent: "travel-bot", Session: "s2", Query: "Ann", TopK: 100}))
		if strings.Contains(strings.Join(got, "|"), "Lisbon") {
			t.Fatalf("session s2 sees session s1's memory: %v", got)
		}
	})
	t.Run("categories filter", func(t *testing.T) {
		for _, h := range search(SearchRequest{Owner: "ann", Query: "Ann", Categories: []string{"project"}, TopK: 100}) {
			if h.Memory.Category != "project" {
				t.Fatalf("category filter leaked %+v", h.Memory)
			}
		}
	})
	t.Run("excludes inactive, superseded and expired", func(t *testing.T) {
		all := search(SearchRequest{Owner: "ann", Query: "Ann", TopK: 100})
		if len(all) != 6 {
			t.Fatalf("%d results before, want 6", len(all))
		}
		byContent := map[string]string{}
		for _, h := range all {
			byContent[h.Memory.Content] = h.Memory.ID
		}
		if err := f.store.Delete(ctx(t), "ann", byContent["Ann writes Go and some Rust"], SourceUser); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Supersede(ctx(t), "ann", byContent["Ann is flying to Lisbon on Friday"], byContent["Ann likes aisle seats on long flights"], SourceUser); err != nil {
			t.Fatal(err)
		}
		f.exec(`UPDATE %s SET expires_at = now() - interval '1 minute' WHERE id = $1`, byContent["Ann works on the payments team"])
		got := hitContents(search(SearchRequest{Owner: "ann", Query: "Ann", TopK: 100}))
		if len(got) != 3 {
			t.Fatalf("after delete, supersede and expiry: %v", got)
		}
	})
	t.Run("min score", func(t *testing.T) {
		for _, h := range search(SearchRequest{Owner: "ann", Query: "dark mode editor", Mode: SearchVector, MinScore: 0.5}) {
			if h.Score < 0.5 {
				t.Fatalf("min score not applied: %+v", h)
			}
		}
	})
	t.Run("access statistics", func(t *testing.T) {
		f.store.access.flush()
		before := search(SearchRequest{Owner: "ben", Query: "dark mode", TopK: 1})[0].Memory
		f.store.access.flush()
		m, err := f.store.Get(ctx(t), "ben", before.ID)
		if err != nil || m.AccessCount != before.AccessCount+1 || m.LastAccessedAt == nil {
			t.Fatalf("access stats not recorded: %+v %v", m, err)
		}
	})
}

// TestHybridUsesPolicyWeights: hybrid ranking uses the policy's weights,
// not the defaults. Three memories aged 90, 45 and 0 days (half-life 45 d:
// decay 0.25, 0.5, 1), the oldest the best match of the query. With the
// default weights (0.6 vector, 0.2 text, 0.2 decay) relevance puts the
// oldest first. With vector 0.1, text 0, decay 0.9 the decay terms are
// 0.225, 0.45 and 0.9: they differ by more than the vector term can
// (0.1 x a cosine within [-1, 1]), so the order is by age, newest first,
// and each score is 0.1 x vector + 0.9 x decay.
func TestHybridUsesPolicyWeights(t *testing.T) {
	f := newFixture(t)
	ids := map[string]string{}
	for content, age := range map[string]int{"Ann works on the payments team": 90, "Ann likes green tea": 45, "Ann owns a red bicycle": 0} {
		m := f.add(AddRequest{Owner: "ann", Content: content, Category: "preference"}).Memory
		ids[content] = m.ID
		f.exec(`UPDATE %s SET updated_at = now() - make_interval(days => $2), last_accessed_at = NULL WHERE id = $1`, m.ID, age)
	}
	p := DefaultPolicy()
	p.Search.VectorWeight, p.Search.TextWeight, p.Search.DecayWeight = 0.1, 0, 0.9
	weighted, err := New(Config{Pool: f.store.core.Pool, Schema: f.store.core.Schema, Policy: p, Embedder: f.store.core.Embedder})
	if err != nil {
		t.Fatal(err)
	}
	defer weighted.Close()
	hits, err := weighted.Search(ctx(t), SearchRequest{Owner: "ann", Query: "payments team", Mode: SearchHybrid})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Ann owns a red bicycle", "Ann likes green tea", "Ann works on the payments team"}
	if got := hitContents(hits); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("hybrid order with weights 0.1/0/0.9 = %v, want %v", got, want)
	}
	for i, decay := range []float64{1, 0.5, 0.25} {
		h := hits[i]
		if math.Abs(h.DecayScore-decay) > 1e-3 || math.Abs(h.Score-(0.1*h.VectorScore+0.9*h.DecayScore)) > 1e-9 {
			t.Fatalf("%q: score %f, decay %f; want decay %g and score 0.1 x %f + 0.9 x decay", h.Memory.Content, h.Score, h.DecayScore, decay, h.VectorScore)
		}
	}
	def, err := f.store.Search(ctx(t), SearchRequest{Owner: "ann", Query: "payments team", Mode: SearchHybrid})
	if err != nil || len(def) == 0 || def[0].Memory.ID != ids["Ann works on the payments team"] {
		t.Fatalf("default weights ranked %v first, want the best match (the test must tell the weights apart)", hitContents(def))
	}
}

func TestSearchValidation(t *testing.T) {
	f := newFixture(t)
	for name, tc := range map[string]struct {
		req   SearchRequest
		field string
	}{
		"no owner":         {SearchRequest{Query: "x"}, "owner"},
		"no query":         {SearchRequest{Owner: "o"}, "query"},
		"query too long":   {SearchRequest{Owner: "o", Query: strings.Repeat("q", 1001)}, "query"},
		"topK over max":    {SearchRequest{Owner: "o", Query: "x", TopK: 101}, "topK"},
		"negative topK":    {SearchRequest{Owner: "o", Query: "x", TopK: -1}, "topK"},
		"bad mode":         {SearchRequest{Owner: "o", Query: "x", Mode: "fuzzy"}, "mode"},
		"unknown category": {SearchRequest{Owner: "o", Query: "x", Categories: []string{"nope"}}, "categories[0]"},
		"invalid utf-8":    {SearchRequest{Owner: "o", Query: "\xfe"}, "query"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.store.Search(ctx(t), tc.req)
			if v, ok := IsValidation(err); !ok || v.Fields[0].Field != tc.field {
				t.Fatalf("err = %v, want validation error on %s", err, tc.field)
			}
		})
	}
}

// TestSmallOwnersInLargeTenant: 200 owners x 1000 memories plus one owner
// with 3. Per-owner search must return the small owner's 3 rows, and for 50
// random owners the top-10 must equal brute force over that owner's rows.
func TestSmallOwnersInLargeTenant(t *testing.T) {
	const owners, perOwner, dims = 200, 1000, 64
	f := newFixture(t, withDims(dims))
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := map[string][][]float32{}
	start := time.Now()
	rows := make([][]any, 0, owners*perOwner+3)
	for o := range owners {
		owner := fmt.Sprintf("owner-%03d", o)
		for i := range perOwner {
			v := randomUnit(rng, dims)
			vecs[owner] = append(vecs[owner], v)
			rows = append(rows, []any{core.NewID(), owner, "agent", "preference", fmt.Sprintf("memory %d of %s", i, owner), pgv.NewVector(v)})
		}
	}
	for i := range 3 {
		v := randomUnit(rng, dims)
		vecs["tiny"] = append(vecs["tiny"], v)
		rows = append(rows, []any{core.NewID(), "tiny", "agent", "preference", fmt.Sprintf("tiny memory %d", i), pgv.NewVector(v)})
	}
	f.copyMemories(t, rows)
	f.exec(`ANALYZE %s`)
	t.Logf("loaded %d memories in %s", len(rows), time.Since(start).Round(time.Millisecond))

	hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "tiny", Query: "tiny memory", Mode: SearchVector, TopK: 10})
	if err != nil || len(hits) != 3 {
		t.Fatalf("the 3-memory owner got %d results (%v)", len(hits), err)
	}

	// Query with the owner's stored vectors perturbed, through the store's
	// own SQL (Search embeds text; here the query vector is given).
	var checked int
	for _, o := range rng.Perm(owners)[:50] {
		owner := fmt.Sprintf("owner-%03d", o)
		q := randomUnit(rng, dims)
		got, err := (*reader)(f.store).searchSQL(ctx(t), SearchVector, SearchRequest{Owner: owner}, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteForceTop(vecs[owner], q, 10)
		if len(got) != 10 {
			t.Fatalf("%s: %d results", owner, len(got))
		}
		for i := range got {
			if d := got[i].VectorScore - want[i]; d > 1e-5 || d < -1e-5 {
				t.Fatalf("%s: result %d has similarity %f, brute force %f (recall < 1)", owner, i, got[i].VectorScore, want[i])
			}
		}
		checked++
	}
	t.Logf("recall@10 = 1.0 over %d owners", checked)

	rows2, err := f.admin.Query(context.Background(), `EXPLAIN (COSTS OFF) SELECT id FROM `+f.store.sql.memories+
		` m WHERE m.owner_id = 'owner-001' AND m.active ORDER BY m.embedding <=> $1 LIMIT 10`, pgv.NewVector(randomUnit(rng, dims)))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows2, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan, " "), "memories_owner_idx") {
		t.Fatalf("the per-owner query does not use the owner index:\n%s", strings.Join(plan, "\n"))
	}
	t.Logf("plan:\n%s", strings.Join(plan, "\n"))
}

func randomUnit(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	n := float32(norm(v))
	for i := range v {
		v[i] /= n
	}
	return v
}

// bruteForceTop returns the k best cosine similarities of q over vs.
func bruteForceTop(vs [][]float32, q []float32, k int) []float64 {
	sims := make([]float64, len(vs))
	for i, v := range vs {
		sims[i] = cos(v, q)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(sims)))
	return sims[:k]
}

// TestDecayAtQueryTime: decay is computed per row when ranking, and a very
// old memory of a short half-life decays to ~0 instead of failing the query
// (PostgreSQL's exp() errors on float underflow).
func TestDecayAtQueryTime(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) {
		p.Categories = append(p.Categories, Category{Name: "fleeting", TTL: 0, HalfLife: Duration(time.Hour), Priority: 10})
	}))
	old := f.add(AddRequest{Owner: "d", Content: "an ancient fleeting thought", Category: "fleeting"}).Memory
	week := f.add(AddRequest{Owner: "d", Content: "a fleeting thought from last week", Category: "preference"}).Memory
	f.add(AddRequest{Owner: "d", Content: "a fleeting identity fact", Category: "identity", Source: SourceUser})
	f.exec(`UPDATE %s SET updated_at = now() - interval '3 years' WHERE id = $1`, old.ID)
	f.exec(`UPDATE %s SET updated_at = now() - interval '45 days' WHERE id = $1`, week.ID)
	hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "d", Query: "fleeting thought", TopK: 10})
	if err != nil {
		t.Fatal(err)
	}
	decay := map[string]float64{}
	for _, h := range hits {
		decay[h.Memory.Category] = h.DecayScore
	}
	if decay["fleeting"] > 1e-100 || decay["identity"] != 1 || decay["preference"] < 0.49 || decay["preference"] > 0.51 {
		t.Fatalf("decay scores = %v; want ~0 (3 years, 1h half-life), 1 (no half-life), 0.5 (one 45d half-life)", decay)
	}
}
