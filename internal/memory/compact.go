package memory

import (
	"math"
	"sort"
	"time"
)

// compactRow is an active memory as compaction sees it.
type compactRow struct {
	id          string
	category    string
	importance  int
	accessCount int64
	updatedAt   time.Time
	vec         []float32
}

// cluster is a keeper and the near-duplicates it supersedes.
type cluster struct {
	keeper string
	losers []string
}

// better orders memories best first: more important, more used, newer.
func better(a, b compactRow) bool {
	if a.importance != b.importance {
		return a.importance > b.importance
	}
	if a.accessCount != b.accessCount {
		return a.accessCount > b.accessCount
	}
	if !a.updatedAt.Equal(b.updatedAt) {
		return a.updatedAt.After(b.updatedAt)
	}
	return a.id < b.id
}

// clusters groups rows greedily: taking rows best first, each row not yet
// in a cluster becomes a keeper and absorbs every later row of its category
// at cosine similarity >= threshold. Pure and deterministic, tested
// without a database.
func clusters(rows []compactRow, threshold float64) []cluster {
	sorted := append([]compactRow(nil), rows...)
	sort.Slice(sorted, func(i, j int) bool { return better(sorted[i], sorted[j]) })
	norms := make([]float64, len(sorted))
	for i, r := range sorted {
		norms[i] = norm(r.vec)
	}
	taken := make([]bool, len(sorted))
	var out []cluster
	for i := range sorted {
		if taken[i] {
			continue
		}
		var c cluster
		for j := i + 1; j < len(sorted); j++ {
			if taken[j] || sorted[j].category != sorted[i].category {
				continue
			}
			if cosine(sorted[i].vec, sorted[j].vec, norms[i], norms[j]) >= threshold {
				taken[j] = true
				c.losers = append(c.losers, sorted[j].id)
			}
		}
		if len(c.losers) > 0 {
			c.keeper = sorted[i].id
			out = append(out, c)
		}
	}
	return out
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
