package memory

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/tenant"
)

// seedRow is one memory written by COPY in the owner-local tests.
type seedRow struct {
	id, owner, category string
	vec                 []float32
	excluded            bool // inactive, expired or superseded: search must never return it
}

// seedInterleaved writes owners x perOwner memories in rounds (one of every
// owner, then the next), as organic growth leaves them on the heap, and
// returns them.
func seedInterleaved(t *testing.T, f *fixture, rng *rand.Rand, owners, perOwner, dims int) []seedRow {
	t.Helper()
	var out []seedRow
	rows := make([][]any, 0, owners*perOwner)
	for i := range perOwner {
		for o := range owners {
			r := seedRow{id: core.NewID(), owner: fmt.Sprintf("owner-%02d", o), category: "preference", vec: randomUnit(rng, dims)}
			out = append(out, r)
			rows = append(rows, []any{r.id, r.owner, "agent", r.category, fmt.Sprintf("memory %d of %s", i, r.owner), pgv.NewVector(r.vec)})
		}
	}
	f.copyMemories(t, rows)
	return out
}

// bruteForce returns the ids of owner's k nearest searchable rows.
func bruteForce(rows []seedRow, owner string, q []float32, k int) ([]string, []float64) {
	type scored struct {
		id  string
		sim float64
	}
	var all []scored
	for _, r := range rows {
		if r.owner == owner && !r.excluded {
			all = append(all, scored{r.id, cos(r.vec, q)})
		}
	}
	for i := range all { // insertion sort: small sets
		for j := i; j > 0 && all[j].sim > all[j-1].sim; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	all = all[:min(k, len(all))]
	ids, sims := make([]string, len(all)), make([]float64, len(all))
	for i, s := range all {
		ids[i], sims[i] = s.id, s.sim
	}
	return ids, sims
}

// explain returns the plan of sql with args, run (ANALYZE) without costs or timing.
func explain(t *testing.T, f *fixture, sql string, args ...any) string {
	t.Helper()
	rows, err := f.admin.Query(ctx(t), `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) `+sql, args...)
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

func hasOwnerVectorsIndex(t *testing.T, f *fixture) bool {
	t.Helper()
	var n int
	err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`,
		f.store.core.Schema, ownerVectorsIndex).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestOwnerLocalSearchIsExact: the two-phase vector search returns the
// brute-force top-10 of every owner, all the memories of owners with fewer
// than 10, never an inactive, expired or superseded row however near, and
// stays exact when filters outside the index leave out most candidates.
func TestOwnerLocalSearchIsExact(t *testing.T) {
	const owners, perOwner, dims = 20, 200, 384
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(17, 1))
	rows := seedInterleaved(t, f, rng, owners, perOwner, dims)

	// owner-00's nearest rows to qx are made unsearchable in three ways.
	qx := randomUnit(rng, dims)
	for i, how := range []string{"inactive", "expired", "superseded"} {
		r := &rows[i*owners] // owner-00's i-th memory
		r.vec, r.excluded = qx, true
		f.exec(`UPDATE %s SET embedding = $1 WHERE id = $2`, pgv.NewVector(qx), r.id)
		switch how {
		case "inactive":
			f.exec(`UPDATE %s SET active = false, deactivated_at = now() WHERE id = $1`, r.id)
		case "expired":
			f.exec(`UPDATE %s SET expires_at = now() - interval '1 minute' WHERE id = $1`, r.id)
		case "superseded":
			f.exec(`UPDATE %s SET active = false, deactivated_at = now(), superseded_by = $2 WHERE id = $1`, r.id, rows[(i+5)*owners].id)
		}
	}
	// Two memories of owner-01 in a category of their own, far from any query.
	for i := range 2 {
		r := &rows[(10+i)*owners+1]
		r.category = "rare"
		f.exec(`UPDATE %s SET category = 'rare' WHERE id = $1`, r.id)
	}
	tiny := []seedRow{}
	for i := range 3 {
		r := seedRow{id: core.NewID(), owner: "tiny", vec: randomUnit(rng, dims)}
		tiny = append(tiny, r)
		f.exec(`INSERT INTO %s (id, owner_id, source, category, content, embedding) VALUES ($1, 'tiny', 'agent', 'preference', $2, $3)`,
			r.id, fmt.Sprintf("tiny %d", i), pgv.NewVector(r.vec))
	}
	rows = append(rows, tiny...)
	f.exec(`VACUUM (ANALYZE) %s`)

	check := func(owner string, q []float32, want []string, wantSims []float64) {
		t.Helper()
		got, err := (*reader)(f.store).searchSQL(ctx(t), SearchVector, SearchRequest{Owner: owner}, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d results, brute force %d", owner, len(got), len(want))
		}
		for i, h := range got {
			if d := h.VectorScore - wantSims[i]; d > 1e-5 || d < -1e-5 {
				t.Fatalf("%s: result %d has similarity %f, brute force %f (recall < 1)", owner, i, h.VectorScore, wantSims[i])
			}
		}
	}
	for o := range owners {
		owner := fmt.Sprintf("owner-%02d", o)
		for range 3 {
			q := randomUnit(rng, dims)
			ids, sims := bruteForce(rows, owner, q, 10)
			check(owner, q, ids, sims)
		}
	}
	ids, sims := bruteForce(rows, "owner-00", qx, 10)
	check("owner-00", qx, ids, sims)
	got, err := (*reader)(f.store).searchSQL(ctx(t), SearchVector, SearchRequest{Owner: "owner-00"}, qx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range got {
		if h.VectorScore > 0.9999 {
			t.Fatalf("an unsearchable memory came back: %+v", h.Memory)
		}
	}
	q := randomUnit(rng, dims)
	ids, sims = bruteForce(rows, "tiny", q, 10)
	if len(ids) != 3 {
		t.Fatalf("brute force of tiny: %d", len(ids))
	}
	check("tiny", q, ids, sims)

	// Only 2 of owner-01's 200 memories pass the category filter: the first
	// phase's candidates hold neither, so the one-phase query answers.
	rare, err := (*reader)(f.store).searchSQL(ctx(t), SearchVector, SearchRequest{Owner: "owner-01", Categories: []string{"rare"}}, randomUnit(rng, dims), 10)
	if err != nil || len(rare) != 2 {
		t.Fatalf("category filter: %d results, want 2 (%v)", len(rare), err)
	}
}

// TestOwnerLocalPlans: after VACUUM the first phase of vector search and
// of add's neighbour lookup read the covering index only (Heap Fetches: 0),
// the lookup reads inactive rows through their owner index, and the text
// side of hybrid and text search reads the owner's text index alone.
func TestOwnerLocalPlans(t *testing.T) {
	const owners, perOwner, dims = 20, 200, 384
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(18, 1))
	seedInterleaved(t, f, rng, owners, perOwner, dims)
	f.exec(`VACUUM (ANALYZE) %s`)

	q := (*reader)(f.store).buildSearch(SearchVector, SearchRequest{Owner: "owner-03"}, randomUnit(rng, dims), 10, false)
	plan := explain(t, f, q.sql, q.args...)
	if !strings.Contains(plan, "Index Only Scan using "+ownerVectorsIndex) || !strings.Contains(plan, "Heap Fetches: 0") {
		t.Fatalf("vector search does not read the covering index only:\n%s", plan)
	}

	plan = explain(t, f, f.store.NearestQuery(dims),
		"owner-03", pgv.NewVector(randomUnit(rng, dims)), "memory 7 of owner-03")
	if !strings.Contains(plan, "Index Only Scan using "+ownerVectorsIndex) || !strings.Contains(plan, "Index Scan using "+ownerVectorsIndex) {
		t.Fatalf("add's neighbour lookup does not use the covering index (index-only for the vector, by md5 for the text):\n%s", plan)
	}
	if !strings.Contains(plan, "memories_inactive_owner_idx") {
		t.Fatalf("add's neighbour lookup does not read the inactive rows through their owner index:\n%s", plan)
	}

	// The text side of hybrid search (and text search) reads the owner's
	// text index alone: the owner is in the index, no BitmapAnd needed.
	for _, mode := range []SearchMode{SearchHybrid, SearchText} {
		req := SearchRequest{Owner: "owner-03", Query: "memory 7", Mode: mode, TopK: 10}
		sql, args := f.store.SearchQuery(req, randomUnit(rng, dims))
		plan = explain(t, f, sql, args...)
		if !strings.Contains(plan, "Bitmap Index Scan on memories_owner_text_idx") || strings.Contains(plan, "BitmapAnd") {
			t.Fatalf("%s search does not read the owner's text index alone:\n%s", mode, plan)
		}
	}
}

// TestOwnerLocalFallbackForLargeVectors: vectors too large for a btree tuple
// get no covering index and the one-phase queries, still exact; the largest
// size that gets one takes the longest owner id.
func TestOwnerLocalFallbackForLargeVectors(t *testing.T) {
	big := tenant.OwnerVectorsMaxDims + 64
	f := newFixture(t, withDims(big))
	if hasOwnerVectorsIndex(t, f) {
		t.Fatalf("a %d-dimension tenant has the covering index", big)
	}
	rng := rand.New(rand.NewPCG(19, 1))
	rows := seedInterleaved(t, f, rng, 3, 30, big)
	q := randomUnit(rng, big)
	if sq := (*reader)(f.store).buildSearch(SearchVector, SearchRequest{Owner: "owner-01"}, q, 10, false); sq.candidates != 0 {
		t.Fatalf("%d dimensions took the two-phase query", big)
	}
	_, sims := bruteForce(rows, "owner-01", q, 10)
	got, err := (*reader)(f.store).searchSQL(ctx(t), SearchVector, SearchRequest{Owner: "owner-01"}, q, 10)
	if err != nil || len(got) != 10 {
		t.Fatalf("search: %d results, %v", len(got), err)
	}
	for i, h := range got {
		if d := h.VectorScore - sims[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("result %d: similarity %f, brute force %f", i, h.VectorScore, sims[i])
		}
	}
	res := f.add(AddRequest{Owner: "owner-01", Content: "memory 3 of owner-01", Source: SourceAgent})
	if res.Action != ActionMerged {
		t.Fatalf("re-adding an identical text: %s, want merged", res.Action)
	}

	edge := newFixture(t, withDims(tenant.OwnerVectorsMaxDims))
	if !hasOwnerVectorsIndex(t, edge) {
		t.Fatalf("a %d-dimension tenant has no covering index", tenant.OwnerVectorsMaxDims)
	}
	owner := strings.Repeat("o", 256)
	first := edge.add(AddRequest{Owner: owner, Content: "the longest owner id with the largest covered vector", Source: SourceAgent})
	again := edge.add(AddRequest{Owner: owner, Content: "the longest owner id with the largest covered vector", Source: SourceAgent})
	if first.Action != ActionAdded || again.Action != ActionMerged || again.Memory.ID != first.Memory.ID {
		t.Fatalf("adds with a 256-byte owner id: %s then %s", first.Action, again.Action)
	}
}
