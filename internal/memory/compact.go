package memory

import (
	"math"
	"sort"
	"time"
)

// compactRow is an active memory as compaction sees it.
type compactRow struct {
	id         string
	category   string
	importance int
	updatedAt  time.Time
	vec        []float32
	// fresh: written after the owner's last complete pass, so not yet
	// compared with the memories that are not fresh.
	fresh bool
}

// compactBefore is the compaction order: more important first, then more
// recently written, then the smaller id (ids are time-ordered: the older). Every key changes only when the memory is
// written (which makes it fresh), so a pass can stop and resume at a cursor
// in this order. Access counts are left out on purpose: every search
// changes them, and a cursor over them would skip or repeat rows.
func compactBefore(a, b compactRow) bool {
	if a.importance != b.importance {
		return a.importance > b.importance
	}
	if !a.updatedAt.Equal(b.updatedAt) {
		return a.updatedAt.After(b.updatedAt)
	}
	return a.id < b.id
}

// cluster is a keeper and the near-duplicates it supersedes.
type cluster struct {
	keeper compactRow
	losers []compactRow
}

// compactor runs the greedy clustering of one owner's snapshot in steps:
// taking rows in compaction order, each row not yet taken is a keeper and
// takes every later row of its category at cosine similarity >= threshold
// (pairs of two rows that are not fresh are skipped: a complete pass has
// compared them). The result does not depend on how the work is cut into
// steps, so a bounded run equals an unbounded one. Pure, tested without a
// database.
type compactor struct {
	rows []compactRow // in compaction order
	unit [][]float32  // the rows' vectors scaled to length 1 (nil: zero vector)
	// tails[i][k] is the length of unit[i] after its first
	// boundStages[k] of len(unit[i]) dimensions (mayBeSimilar).
	tails     [][len(boundStages)]float64
	taken     []bool
	threshold float64
	// byCategory holds the indexes of each category's rows, in order.
	byCategory map[string][]int
	position   []int // position of row i in byCategory[its category]
	next       int   // the next row to look at
	scan       int   // how far into its category's later rows next has compared
}

func newCompactor(rows []compactRow, threshold float64) *compactor {
	sorted := append([]compactRow(nil), rows...)
	sort.Slice(sorted, func(i, j int) bool { return compactBefore(sorted[i], sorted[j]) })
	c := &compactor{rows: sorted, unit: make([][]float32, len(sorted)), tails: make([][len(boundStages)]float64, len(sorted)),
		taken: make([]bool, len(sorted)), threshold: threshold, byCategory: map[string][]int{}, position: make([]int, len(sorted))}
	for i, r := range sorted {
		c.unit[i] = unitVector(r.vec)
		for k, f := range boundStages {
			c.tails[i][k] = norm(c.unit[i][len(c.unit[i])*f.num/f.den:])
		}
		c.position[i] = len(c.byCategory[r.category])
		c.byCategory[r.category] = append(c.byCategory[r.category], i)
	}
	return c
}

// step looks at up to maxRows more rows as keepers and stops once the
// clusters found hold maxLosers losers, if need be in the middle of a
// keeper's comparisons (the next step continues them). It returns those
// clusters, the last row it finished looking at (nil when none) and whether
// the snapshot is done.
func (c *compactor) step(maxRows, maxLosers int) (found []cluster, last *compactRow, done bool) {
	losers := 0
	for n := 0; n < maxRows && losers < maxLosers && c.next < len(c.rows); n++ {
		i := c.next
		if !c.taken[i] {
			g, finished := c.absorb(i, maxLosers-losers)
			if len(g.losers) > 0 {
				found = append(found, g)
				losers += len(g.losers)
			}
			if !finished {
				break
			}
		}
		c.next, c.scan = i+1, 0
		last = &c.rows[i]
	}
	return found, last, c.next >= len(c.rows)
}

// absorb takes up to limit rows after keeper i that are near-duplicates of
// it, continuing where the last call for i stopped; finished is false when
// it stopped at limit with rows left to compare.
func (c *compactor) absorb(i, limit int) (g cluster, finished bool) {
	g.keeper = c.rows[i]
	same := c.byCategory[c.rows[i].category]
	for k := c.position[i] + 1 + c.scan; k < len(same); k++ {
		if len(g.losers) == limit {
			c.scan = k - c.position[i] - 1
			return g, false
		}
		j := same[k]
		if c.taken[j] || (!c.rows[i].fresh && !c.rows[j].fresh) {
			continue
		}
		if c.similar(i, j) {
			c.taken[j] = true
			g.losers = append(g.losers, c.rows[j])
		}
	}
	return g, true
}

// clusters is the unbounded run over rows: every cluster at once.
func clusters(rows []compactRow, threshold float64) []cluster {
	all, _, _ := newCompactor(rows, threshold).step(math.MaxInt, math.MaxInt)
	return all
}

// similar reports whether rows i and j are near-duplicates: cosine
// similarity >= threshold. A zero vector is similar to nothing.
func (c *compactor) similar(i, j int) bool {
	a, b := c.unit[i], c.unit[j]
	if a == nil || b == nil || len(a) != len(b) {
		return false
	}
	if !c.mayBeSimilar(i, j) {
		return false
	}
	return float64(dot(a, b)) >= c.threshold
}

// boundStages are the fractions of the dimensions after which
// mayBeSimilar checks its bound.
var boundStages = [...]struct{ num, den int }{{1, 8}, {1, 4}, {1, 2}}

// boundSlack is how far below the threshold mayBeSimilar's bound must be
// to rule a pair out. The bound holds for the exact sums; float32 sums of
// n products of unit-vector components are within n x 2^-24 of them
// (1e-3 at 16,000 dimensions), so a slack of 0.01 cannot rule out a pair
// whose full dot product reaches the threshold.
const boundSlack = 0.01

// mayBeSimilar is false when rows i and j cannot reach the threshold: the
// dot product over the first part of the dimensions plus the product of
// the lengths of the rest (Cauchy-Schwarz: the most the rest can add) is
// below it, checked after an eighth, a quarter and half of the
// dimensions. Most pairs of an owner are far apart and are ruled out after
// an eighth (compaction compares every pair: issue 32); a pair it lets
// through is decided by the full dot product exactly as before, so the
// clusters do not change (TestSimilarBoundChangesNothing).
func (c *compactor) mayBeSimilar(i, j int) bool {
	a, b := c.unit[i], c.unit[j]
	var head float32
	from := 0
	for k, f := range boundStages {
		to := len(a) * f.num / f.den
		head += dot(a[from:to], b[from:to])
		from = to
		if float64(head)+c.tails[i][k]*c.tails[j][k] < c.threshold-boundSlack {
			return false
		}
	}
	return true
}

// unitVector returns v scaled to length 1, or nil for a zero vector.
func unitVector(v []float32) []float32 {
	n := norm(v)
	if n == 0 {
		return nil
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// dot is the dot product of two vectors of equal length, in eight running
// sums so the additions do not wait on each other: compaction compares
// every pair of an owner's memories, and this is its inner loop (float32
// error over 4096 terms ~1e-6, far below any threshold's resolution).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	n := len(a) &^ 7
	for i := 0; i < n; i += 8 {
		a8, b8 := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += a8[0] * b8[0]
		s1 += a8[1] * b8[1]
		s2 += a8[2] * b8[2]
		s3 += a8[3] * b8[3]
		s4 += a8[4] * b8[4]
		s5 += a8[5] * b8[5]
		s6 += a8[6] * b8[6]
		s7 += a8[7] * b8[7]
	}
	for i := n; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func cosine(a, b []float32, na, nb float64) float64 {
	if na == 0 || nb == 0 || len(a) != len(b) {
		return 0
	}
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot / (na * nb)
}
