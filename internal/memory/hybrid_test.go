package memory

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/tenant"
)

// candidateWords make texts: a few common words (queries of them match many
// rows), many rare ones (few rows) and words no memory has (no row).
var (
	commonWords = []string{"coffee", "garden", "travel", "python", "music", "budget"}
	rareWords   = func() []string {
		out := make([]string, 400)
		for i := range out {
			out[i] = fmt.Sprintf("zq%03dword", i)
		}
		return out
	}()
)

// equivalenceCategories: with and without a half-life, one pinned, one
// global (tenant-wide rows under GlobalOwner).
func equivalencePolicy(p *Policy) {
	p.Categories = append(p.Categories,
		Category{Name: "shared", HalfLife: Duration(20 * 24 * time.Hour), Priority: 10, Global: true},
		Category{Name: "fact", Priority: 5})
}

// seedEquivalence writes owners' memories straight into the table: old and
// fresh rows (updated over six months), access statistics on a third,
// agents, sessions, flagged, inactive and expired rows, every category, and
// global rows; sizes per owner as given.
func seedEquivalence(t *testing.T, f *fixture, rng *rand.Rand, sizes map[string]int) {
	t.Helper()
	cats := []string{"identity", "preference", "project", "contextual", "fact", "shared"}
	var ids, owners, agents, sessions, categories, contents, vectors, flags []string
	var importance []int
	var ages, accessed []float64
	var active, expired []bool
	for owner, n := range sizes {
		for i := range n {
			words := []string{}
			if rng.IntN(3) > 0 {
				words = append(words, commonWords[rng.IntN(len(commonWords))])
			}
			for range 3 + rng.IntN(5) {
				words = append(words, rareWords[rng.IntN(len(rareWords))])
			}
			text := strings.Join(words, " ") + fmt.Sprintf(" note %d", i)
			v, err := f.store.core.Embedder.Embed(ctx(t), []string{text})
			if err != nil {
				t.Fatal(err)
			}
			cat := cats[rng.IntN(len(cats))]
			o, agent, session := owner, "", ""
			if cat == "shared" {
				o = GlobalOwner
			} else {
				if rng.IntN(4) == 0 {
					agent = []string{"bot-a", "bot-b"}[rng.IntN(2)]
					if rng.IntN(2) == 0 {
						session = []string{"s1", "s2"}[rng.IntN(2)]
					}
				}
			}
			flag := "{}"
			if rng.IntN(12) == 0 {
				flag = "{" + FlagInjection + "}"
			}
			ids, owners, agents, sessions = append(ids, core.NewID()), append(owners, o), append(agents, agent), append(sessions, session)
			categories, contents, vectors, flags = append(categories, cat), append(contents, text), append(vectors, pgv.NewVector(v[0]).String()), append(flags, flag)
			importance = append(importance, 1+rng.IntN(10))
			ages = append(ages, rng.Float64()*180*86400)
			acc := -1.0
			if rng.IntN(3) == 0 {
				acc = rng.Float64() * 60 * 86400
			}
			accessed = append(accessed, acc)
			active, expired = append(active, rng.IntN(15) != 0), append(expired, rng.IntN(20) == 0)
		}
	}
	_, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.memories+`
			(id, owner_id, agent_id, session_id, source, category, content, embedding, importance, flags,
			 active, deactivated_at, expires_at, created_at, updated_at)
		SELECT id::uuid, o, a, s, 'agent', c, t, v::vector, imp, fl::text[],
			act, CASE WHEN act THEN NULL ELSE now() END, CASE WHEN ex THEN now() - interval '1 hour' END,
			now() - make_interval(secs => age), now() - make_interval(secs => age)
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::int[], $10::float8[], $11::bool[], $12::bool[]) AS r(id, o, a, s, c, t, v, fl, imp, age, act, ex)`,
		ids, owners, agents, sessions, categories, contents, vectors, flags, importance, ages, active, expired)
	if err != nil {
		t.Fatalf("seeding: %v", err)
	}
	_, err = f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.access+` (memory_id, owner_id, access_count, last_accessed_at)
		SELECT id::uuid, o, 3, now() - make_interval(secs => acc)
		FROM unnest($1::text[], $2::text[], $3::float8[]) AS r(id, o, acc) WHERE acc >= 0`, ids, owners, accessed)
	if err != nil {
		t.Fatalf("seeding access statistics: %v", err)
	}
	f.exec(`VACUUM (ANALYZE) %s`)
}

// compareHybrid runs the owner-local hybrid search and today's one-phase
// query over all the owner's rows in one transaction (one now(), so equal
// decay scores) and fails unless their hits are the same; it returns which
// query answered the owner-local search (hybridAttempts) and its hits.
func compareHybrid(t *testing.T, f *fixture, what string, req SearchRequest, vec []float32, k int) (int, []SearchHit) {
	t.Helper()
	tx, err := f.store.core.Pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx(t)) }()
	got, attempt, err := (*reader)(f.store).hybridAttempts(ctx(t), tx, req, vec, k)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want, _, err := (*reader)(f.store).runSearch(ctx(t), tx, SearchHybrid, (*reader)(f.store).buildSearch(SearchHybrid, req, vec, k, true))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	sameHits(t, what, got, want)
	return attempt, got
}

// sameHits fails unless got and want hold the same ids in the same order
// with scores within 1e-9.
func sameHits(t *testing.T, what string, got, want []SearchHit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, the one-phase query %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].Memory.ID != want[i].Memory.ID || math.Abs(got[i].Score-want[i].Score) > 1e-9 {
			t.Fatalf("%s: hit %d is %s (score %.12f), the one-phase query's %s (score %.12f)",
				what, i, got[i].Memory.ID, got[i].Score, want[i].Memory.ID, want[i].Score)
		}
	}
}

// TestHybridCandidatesAreExact: the owner-local hybrid search returns
// exactly the one-phase query's hits (ids, order, scores) for random and
// non-default weights, text queries matching no, few and many rows (and
// only stop words), every filter, global categories, owners with fewer
// than K rows, and K from 1 to 50.
func TestHybridCandidatesAreExact(t *testing.T) {
	f := newFixture(t, withPolicy(equivalencePolicy))
	rng := rand.New(rand.NewPCG(17, 10))
	seedEquivalence(t, f, rng, map[string]int{"ann": 400, "ben": 300, "cyd": 250, "tiny": 4})
	weights := []Search{
		{VectorWeight: 0.6, TextWeight: 0.2, DecayWeight: 0.2},
		{VectorWeight: 0.5, TextWeight: 0.5, DecayWeight: 0},
		{VectorWeight: 0.7, TextWeight: 0, DecayWeight: 0.3},
		{VectorWeight: 0.05, TextWeight: 0.5, DecayWeight: 0.45},
		{VectorWeight: 0, TextWeight: 0.3, DecayWeight: 0.7},
		{VectorWeight: 1, TextWeight: 0, DecayWeight: 0},
	}
	for range 4 {
		weights = append(weights, Search{VectorWeight: rng.Float64(), TextWeight: rng.Float64(), DecayWeight: rng.Float64()})
	}
	queries := []string{
		commonWords[0] + " " + rareWords[1],                       // many rows
		rareWords[7] + " " + rareWords[99] + " " + rareWords[250], // few rows
		"unrelated words nobody wrote",                            // no row
		"the and of",                                              // only stop words: an empty text query
		commonWords[2] + " " + commonWords[4] + " " + rareWords[3],
	}
	filters := []SearchRequest{
		{},
		{ExcludeFlagged: true},
		{Agent: "bot-a"},
		{Agent: "bot-b", Session: "s2", ExcludeFlagged: true},
		{Categories: []string{"project", "shared"}},
		{Categories: []string{"identity"}, ExcludeFlagged: true},
	}
	cases, checked := 0, 0
	answered := map[int]int{}
	for wi, w := range weights {
		w.DefaultTopK = 10
		f.store.core.Policy.Search = w
		for _, owner := range []string{"ann", "ben", "cyd", "tiny", "nobody"} {
			for qi, query := range queries {
				for fi, filter := range filters {
					k := []int{10, 1, 3, 25, 50}[(wi+qi+fi)%5]
					req := filter
					req.Owner, req.Query, req.Mode, req.TopK = owner, query, SearchHybrid, k
					vec, err := f.store.core.Embedder.Embed(ctx(t), []string{query})
					if err != nil {
						t.Fatal(err)
					}
					attempt, got := compareHybrid(t, f, fmt.Sprintf("weights %+v, owner %s, query %q, filter %+v, k %d", w, owner, query, filter, k), req, vec[0], k)
					cases++
					checked += len(got)
					answered[attempt]++
				}
			}
		}
	}
	t.Logf("%d searches, %d hits compared; answered by attempt (2 = one-phase): %v", cases, checked, answered)
	if checked == 0 {
		t.Fatal("no hit was compared")
	}
	// The data (decay over six months) makes every path answer some
	// searches: the first attempt, the wider one and the one-phase query.
	for attempt := range hybridAttempts + 1 {
		if answered[attempt] == 0 {
			t.Fatalf("no search was answered by attempt %d: %v", attempt, answered)
		}
	}
}

// TestHybridFallbackIsTaken: when the best rows by score are not among the
// nearest (decay dominates and the nearest rows are old), the bound cannot
// prove the owner-local attempts exact; the one-phase query answers.
func TestHybridFallbackIsTaken(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(17, 11))
	const dims = 384
	q := randomUnit(rng, dims)
	// 300 rows: the 150 nearest to q written a year ago (decay ~0 in
	// "contextual", half-life 15 days), the 150 farthest fresh.
	var ids, contents, vectors []string
	var ages []float64
	for i := range 300 {
		v := randomUnit(rng, dims)
		near := i < 150
		if near {
			for j := range v {
				v[j] = 0.8*q[j] + 0.2*v[j]
			}
		}
		age := 3600.0
		if near {
			age = 365 * 86400
		}
		ids, contents, vectors, ages = append(ids, core.NewID()), append(contents, fmt.Sprintf("row %d", i)), append(vectors, pgv.NewVector(v).String()), append(ages, age)
	}
	_, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.memories+`
			(id, owner_id, source, category, content, embedding, created_at, updated_at)
		SELECT id::uuid, 'ann', 'agent', 'contextual', c, v::vector, now() - make_interval(secs => age), now() - make_interval(secs => age)
		FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[]) AS r(id, c, v, age)`, ids, contents, vectors, ages)
	if err != nil {
		t.Fatal(err)
	}
	f.exec(`VACUUM (ANALYZE) %s`)
	f.store.core.Policy.Search = Search{VectorWeight: 0.3, TextWeight: 0, DecayWeight: 0.7, DefaultTopK: 10}
	req := SearchRequest{Owner: "ann", Query: "row", Mode: SearchHybrid, TopK: 10}
	attempt, got := compareHybrid(t, f, "adversarial", req, q, 10)
	// N = 30 and then 120 candidates are all old near rows: neither
	// attempt's bound holds, the one-phase query answers.
	if attempt != hybridAttempts {
		t.Fatalf("attempt %d answered although no owner-local bound can hold", attempt)
	}
	for _, h := range got {
		if h.DecayScore < 0.5 {
			t.Fatalf("an old near row outranked the fresh ones: %+v", h)
		}
	}

	// With the default weights the nearest rows win and the first attempt
	// answers.
	f.store.core.Policy.Search = DefaultPolicy().Search
	attempt, _ = compareHybrid(t, f, "default weights", req, q, 10)
	t.Logf("default weights answered by attempt %d", attempt)
}

// TestHybridLargeVectorsTakeTheOnePhaseQuery: above OwnerVectorsMaxDims
// there is no covering index; hybrid search keeps the one-phase query.
func TestHybridLargeVectorsTakeTheOnePhaseQuery(t *testing.T) {
	big := tenant.OwnerVectorsMaxDims + 64
	f := newFixture(t, withDims(big))
	for i := range 12 {
		f.add(AddRequest{Owner: "ann", Content: fmt.Sprintf("coffee note %d with %s", i, rareWords[i]), Source: SourceAgent})
	}
	vec, _ := f.store.core.Embedder.Embed(ctx(t), []string{"coffee"})
	req := SearchRequest{Owner: "ann", Query: "coffee", Mode: SearchHybrid, TopK: 5}
	sql, _ := f.store.SearchQuery(req, vec[0])
	if strings.Contains(sql, "bound") {
		t.Fatalf("a %d-dimension tenant got the owner-local hybrid query", big)
	}
	tx, err := f.store.core.Pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx(t)) }()
	got, err := (*reader)(f.store).searchIn(ctx(t), tx, SearchHybrid, req, vec[0], 5)
	if err != nil || len(got) != 5 {
		t.Fatalf("%d hits, %v", len(got), err)
	}
	want, _, err := (*reader)(f.store).runSearch(ctx(t), tx, SearchHybrid, (*reader)(f.store).buildSearch(SearchHybrid, req, vec[0], 5, true))
	if err != nil {
		t.Fatal(err)
	}
	sameHits(t, "large vectors", got, want)
}

// TestFilteredVectorSearchWidens: a filtered vector search first reads
// K+K/4+2 candidates; when the filters leave fewer than K of them it widens
// and then runs the one-phase query, so it still returns the exact top K —
// also when every candidate of the first attempts fails the filters (an
// empty answer carries no candidate count).
func TestFilteredVectorSearchWidens(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(17, 12))
	const dims = 384
	q := randomUnit(rng, dims)
	neg := make([]float32, dims)
	for i := range q {
		neg[i] = -q[i]
	}
	// 200 rows of ann: the 20 nearest to q flagged, the 2 farthest (-q) in
	// category "project", the rest "preference".
	var ids, cats, vectors, flags []string
	for i := range 200 {
		v, cat, flag := randomUnit(rng, dims), "preference", "{}"
		switch {
		case i < 20:
			for j := range v {
				v[j] = 0.9*q[j] + 0.1*v[j]
			}
			flag = "{" + FlagInjection + "}"
		case i < 22:
			v, cat = neg, "project"
		}
		ids, cats, vectors, flags = append(ids, core.NewID()), append(cats, cat), append(vectors, pgv.NewVector(v).String()), append(flags, flag)
	}
	_, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.memories+` (id, owner_id, source, category, content, embedding, flags)
		SELECT id::uuid, 'ann', 'agent', c, 'row ' || id, v::vector, fl::text[]
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r(id, c, v, fl)`, ids, cats, vectors, flags)
	if err != nil {
		t.Fatal(err)
	}
	f.exec(`VACUUM (ANALYZE) %s`)
	for _, req := range []SearchRequest{
		{Owner: "ann", Mode: SearchVector, ExcludeFlagged: true},
		{Owner: "ann", Mode: SearchVector, Categories: []string{"project"}},
		{Owner: "ann", Mode: SearchVector, Categories: []string{"project"}, ExcludeFlagged: true},
	} {
		got, err := (*reader)(f.store).searchSQL(ctx(t), SearchVector, req, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := (*reader)(f.store).runSearch(ctx(t), f.store.core.Pool, SearchVector, (*reader)(f.store).buildSearch(SearchVector, req, q, 10, true))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Fatalf("%+v: the one-phase query found nothing", req)
		}
		sameHits(t, fmt.Sprintf("%+v", req), got, want)
		for _, h := range got {
			if len(h.Memory.Flags) > 0 && req.ExcludeFlagged {
				t.Fatalf("%+v: a flagged memory came back", req)
			}
		}
	}
}
