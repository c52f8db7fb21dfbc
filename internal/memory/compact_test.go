package memory

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestClusters(t *testing.T) {
	now := time.Now()
	v := func(x, y float32) []float32 { return []float32{x, y} }
	rows := []compactRow{
		{id: "a", category: "p", importance: 5, vec: v(1, 0), updatedAt: now, fresh: true},
		{id: "b", category: "p", importance: 9, vec: v(0.999, 0.01), updatedAt: now, fresh: true},
		{id: "c", category: "p", importance: 5, vec: v(1, 0.001), updatedAt: now.Add(time.Hour), fresh: true},
		{id: "d", category: "q", importance: 9, vec: v(1, 0), updatedAt: now, fresh: true},
		{id: "e", category: "p", importance: 5, vec: v(0, 1), updatedAt: now, fresh: true},
	}
	got := clusters(rows, 0.95)
	if len(got) != 1 || got[0].keeper.id != "b" || len(got[0].losers) != 2 || got[0].losers[0].id != "c" || got[0].losers[1].id != "a" {
		t.Fatalf("clusters = %+v; want b keeping c (newer) and a, d alone (other category), e alone", got)
	}
	if len(clusters(rows[:1], 0.95)) != 0 {
		t.Fatal("a single row formed a cluster")
	}
	// Two memories compared by an earlier complete pass (neither fresh) are
	// not compared again; a fresh one is compared with every other.
	stale := slices.Clone(rows)
	for i := range stale {
		stale[i].fresh = stale[i].id == "a"
	}
	got = clusters(stale, 0.95)
	if len(got) != 1 || got[0].keeper.id != "b" || len(got[0].losers) != 1 || got[0].losers[0].id != "a" {
		t.Fatalf("incremental clusters = %+v; want only b keeping the fresh a", got)
	}
}

// randomCompactRows makes n rows in a few categories, many of them near
// copies of a few bases, with importances and times that tie often.
func randomCompactRows(r *rand.Rand, n int) []compactRow {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bases := make([][]float32, n/4+1)
	for i := range bases {
		bases[i] = make([]float32, 8)
		for d := range bases[i] {
			bases[i][d] = r.Float32()*2 - 1
		}
	}
	rows := make([]compactRow, n)
	for i := range rows {
		vec := slices.Clone(bases[r.IntN(len(bases))])
		for d := range vec {
			vec[d] += (r.Float32() - 0.5) * 0.2
		}
		rows[i] = compactRow{id: fmt.Sprintf("%04d", i), category: []string{"p", "q", "r"}[r.IntN(3)],
			importance: 1 + r.IntN(3), updatedAt: base.Add(time.Duration(r.IntN(20)) * time.Second), vec: vec, fresh: r.IntN(4) > 0}
	}
	return rows
}

// supersededBy maps each loser to its keeper.
func supersededBy(cs []cluster) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		for _, l := range c.losers {
			out[l.id] = c.keeper.id
		}
	}
	return out
}

// TestCompactorStepsEqualUnbounded: however the work is cut — steps of any
// size, or runs that stop and resume on a fresh snapshot of the rows after
// the cursor without the superseded ones, as the job does — the result is
// the unbounded one.
func TestCompactorStepsEqualUnbounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		rows := randomCompactRows(r, 20+r.IntN(200))
		want := supersededBy(clusters(rows, 0.97))
		if round == 0 && len(want) == 0 {
			t.Fatal("the random rows hold no duplicates: the test tests nothing")
		}
		got := map[string]string{}
		left := rows
		var cursor *compactRow
		for runs := 0; len(left) > 0; runs++ {
			if runs > 10*len(rows) {
				t.Fatal("runs do not progress")
			}
			c := newCompactor(left, 0.97)
			found, last, _ := c.step(1+r.IntN(10), 1+r.IntN(3))
			for _, g := range found {
				if len(g.losers) > 3 {
					t.Fatalf("a step superseded %d memories of one keeper, more than its bound", len(g.losers))
				}
			}
			for l, k := range supersededBy(found) {
				got[l] = k
			}
			if last != nil {
				cursor = last
			}
			// The next run reads the rows after the cursor that are still active.
			var next []compactRow
			for _, row := range left {
				if _, gone := got[row.id]; !gone && (cursor == nil || compactBefore(*cursor, row)) {
					next = append(next, row)
				}
			}
			left = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: resumed runs superseded %v, unbounded %v", round, got, want)
		}
	}
}

// BenchmarkCompactPairs measures compaction's inner loop: one comparison
// of two 384-dimension memories (no duplicates, so every pair is compared).
//
//	go test ./internal/memory -run '^$' -bench BenchmarkCompactPairs
func BenchmarkCompactPairs(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	rows := make([]compactRow, 2000)
	for i := range rows {
		vec := make([]float32, 384)
		for d := range vec {
			vec[d] = r.Float32()*2 - 1
		}
		rows[i] = compactRow{id: fmt.Sprintf("%05d", i), category: "c", importance: 5, vec: vec, fresh: true}
	}
	pairs := len(rows) * (len(rows) - 1) / 2
	b.ResetTimer()
	for b.Loop() {
		if len(clusters(rows, 0.95)) != 0 {
			b.Fatal("random vectors clustered")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pairs), "ns/pair")
}

// TestSimilarBoundChangesNothing: mayBeSimilar never rules out a pair
// whose full dot product reaches the threshold — pairs from far apart to
// identical, hundreds within 0.01 of the threshold, vectors whose weight sits
// in the first or the last dimensions, several sizes and thresholds — and
// it does rule out most far pairs (else it saves nothing).
func TestSimilarBoundChangesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ruledOut, far, close := 0, 0, 0
	for round := range 40 {
		dims := []int{8, 13, 384, 1536}[round%4]
		threshold := []float64{0.8, 0.95, 0.99}[round%3]
		var rows []compactRow
		for i := range 40 {
			base := make([]float32, dims)
			for d := range base {
				weight := float32(1)
				switch i % 3 { // weight in the first or the last dimensions
				case 1:
					weight = float32(d) / float32(dims)
				case 2:
					weight = float32(dims-d) / float32(dims)
				}
				base[d] = (r.Float32()*2 - 1) * weight
			}
			rows = append(rows, compactRow{id: fmt.Sprintf("%03d", len(rows)), category: "c", vec: base, fresh: true})
			// A copy at a distance that puts the pair's cosine anywhere
			// from far below the threshold to 1.
			near := slices.Clone(base)
			noise := float32(r.Float64() * r.Float64())
			for d := range near {
				near[d] += (r.Float32()*2 - 1) * noise * float32(norm(base)/math.Sqrt(float64(dims)))
			}
			rows = append(rows, compactRow{id: fmt.Sprintf("%03d", len(rows)), category: "c", vec: near, fresh: true})
		}
		c := newCompactor(rows, threshold)
		for i := range c.rows {
			for j := i + 1; j < len(c.rows); j++ {
				full := float64(dot(c.unit[i], c.unit[j]))
				may := c.mayBeSimilar(i, j)
				if full >= threshold && !may {
					t.Fatalf("round %d (%d dims, threshold %v): a pair at %v was ruled out", round, dims, threshold, full)
				}
				if math.Abs(full-threshold) < 0.01 {
					close++
				}
				if full < threshold-0.3 {
					far++
					if !may {
						ruledOut++
					}
				}
			}
		}
	}
	if far == 0 || ruledOut < far/2 || close < 100 {
		t.Fatalf("the bound ruled out %d of %d far pairs; %d pairs within 0.01 of the threshold", ruledOut, far, close)
	}
	t.Logf("ruled out %d of %d far pairs; %d pairs within 0.01 of the threshold", ruledOut, far, close)
}
