package jobrun

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// checkAfter checks the tenant after the switch: the re-embed is done and
// records B; every acknowledged add is there with its text; every row of
// every vector table that had a vector has B's vector of its text (no row
// was lost or left on A); vector search under B has recall@10 = 1.0
// against a brute-force ranking of B's vectors of the owner's texts.
func (r *loadRun) checkAfter(ctx context.Context, withVectors map[string]int) {
	t := r.t
	p, err := memory.ReadReembedProgress(ctx, r.jt.admin, r.target)
	if err != nil || p.Phase == memory.ReembedPhaseFilling || p.Current != fakeTo() {
		t.Fatalf("after the switch: %+v (%v); want idle with %s current", p.State, err, fakeTo())
	}
	ids := make([]string, 0, len(r.added))
	for id := range r.added {
		ids = append(ids, id)
	}
	rows, err := r.jt.admin.Query(ctx, `SELECT id::text, content FROM `+r.jt.schema+`.memories WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for rows.Next() {
		var id, content string
		if err := rows.Scan(&id, &content); err != nil {
			t.Fatal(err)
		}
		if r.added[id] == content {
			found++
		}
	}
	if rows.Err() != nil || found != len(ids) {
		t.Errorf("%d of %d acknowledged adds found with their text after the switch (%v)", found, len(ids), rows.Err())
	}
	got := checkFakeVectors(t, ctx, r.jt.admin, r.jt.schema)
	want := maps.Clone(withVectors)
	want["memories"] += len(r.added)
	if !maps.Equal(got, want) {
		t.Errorf("rows with a vector after the switch: %v, want %v (before Begin, plus the adds)", got, want)
	}
	checked := 0
	for o := 0; o < loadOwners; o += 4 {
		for q := range 4 {
			r.checkRecall(ctx, loadOwner(o), loadQueries[(o+q)%len(loadQueries)])
			checked++
		}
	}
	t.Logf("after the switch: rows with B's vector %v; %d acknowledged adds found; recall@10 = 1.0 for %d searches", got, found, checked)
}

// checkRecall compares the top 10 of B's store's vector search with the
// brute-force top 10 of B's vectors of the owner's searchable texts (a
// result tied with the 10th at its distance counts as found).
func (r *loadRun) checkRecall(ctx context.Context, owner, query string) {
	t := r.t
	rows, err := r.jt.admin.Query(ctx, `SELECT id::text, content FROM `+r.jt.schema+`.memories
		WHERE owner_id = $1 AND active AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > now())`, owner)
	if err != nil {
		t.Fatal(err)
	}
	q := fakeVector(query)
	dist := map[string]float64{}
	for rows.Next() {
		var id, content string
		if err := rows.Scan(&id, &content); err != nil {
			t.Fatal(err)
		}
		dist[id] = cosineDistance(q, fakeVector(content))
	}
	if err := rows.Err(); err != nil || len(dist) < 10 {
		t.Fatalf("%s: %d searchable memories (%v)", owner, len(dist), err)
	}
	all := slices.Sorted(maps.Values(dist))
	tenth := all[9]
	hits, err := r.cur.Load().store.Search(ctx, memory.SearchRequest{Owner: owner, Query: query, Mode: memory.SearchVector, TopK: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, h := range hits {
		d, ok := dist[h.Memory.ID]
		if ok && !seen[h.Memory.ID] && d <= tenth+1e-6 {
			seen[h.Memory.ID] = true
		}
	}
	if len(seen) != 10 {
		t.Errorf("%s, %q: recall@10 = %.1f (%d results)", owner, query, float64(len(seen))/10, len(hits))
	}
}

func cosineDistance(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return 1 - dot/math.Sqrt(na*nb)
}

// countVectors counts the rows of each vector table with a vector.
func countVectors(t *testing.T, ctx context.Context, jt *jobTenant) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, vt := range vectorTables {
		var n int
		if err := jt.admin.QueryRow(ctx, `SELECT count(*) FROM `+jt.schema+`.`+vt.name+` WHERE embedding IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[vt.name] = n
	}
	return out
}
