package extractive

import (
	"math"
	"slices"
)

// MaxRanked bounds the sentences TextRank compares pairwise: the similarity
// matrix has at most MaxRanked² cells (40,000). The others are ranked after
// them by their TF-IDF score alone.
const MaxRanked = 200

// A head sentence's score is centralShare of its TextRank centrality and
// the rest of its TF-IDF score (each relative to the highest), times its
// boosts. Centrality alone favours the sentences that repeat what many
// say; the TF-IDF part gives the rare terms of a specific sentence their
// weight back.
const centralShare = 0.5

// The boosts multiply a sentence's score: a user's turn says what the user
// wants, which later turns need most; names, numbers and dates are the
// details a summary loses first and an agent needs back, so they weigh
// most (a sentence with both outweighs any filler of the user's:
// TestSummarizeKeepsNamesAndNumbers).
const (
	userBoost    = 1.3
	namedBoost   = 2
	numericBoost = 2
	// A sentence of one or two terms ("Thanks!", "Noted.") says little.
	shortPenalty = 0.5
	// TextRank's damping factor and its fixed number of rounds (fixed, not
	// "until converged", so the result does not depend on float noise).
	damping     = 0.85
	rankRounds  = 30
	minShortLen = 3
)

// vector is a sparse TF-IDF vector: term ids ascending, with weights, and
// its norm.
type vector struct {
	ids  []int
	w    []float64
	norm float64
}

// tfidf builds every sentence's vector. Term ids are given in the order
// terms are first met, so the vectors (and every sum over them) are the
// same on every run.
func tfidf(fs []features) []vector {
	ids := map[string]int{}
	var df []int
	counts := make([]map[int]int, len(fs))
	for i, f := range fs {
		counts[i] = map[int]int{}
		for _, t := range f.terms {
			id, ok := ids[t]
			if !ok {
				id = len(df)
				ids[t] = id
				df = append(df, 0)
			}
			if counts[i][id] == 0 {
				df[id]++
			}
			counts[i][id]++
		}
	}
	n := float64(len(fs))
	out := make([]vector, len(fs))
	for i, c := range counts {
		v := vector{ids: make([]int, 0, len(c))}
		for id := range c {
			v.ids = append(v.ids, id)
		}
		slices.Sort(v.ids)
		for _, id := range v.ids {
			w := (1 + math.Log(float64(c[id]))) * math.Log(1+n/float64(df[id]))
			v.w = append(v.w, w)
			v.norm += w * w
		}
		v.norm = math.Sqrt(v.norm)
		out[i] = v
	}
	return out
}

// cosine is the cosine similarity of a and b (0 when either is empty).
func cosine(a, b vector) float64 {
	if a.norm == 0 || b.norm == 0 {
		return 0
	}
	dot := 0.0
	for i, j := 0, 0; i < len(a.ids) && j < len(b.ids); {
		switch {
		case a.ids[i] < b.ids[j]:
			i++
		case a.ids[i] > b.ids[j]:
			j++
		default:
			dot += a.w[i] * b.w[j]
			i++
			j++
		}
	}
	return dot / (a.norm * b.norm)
}

// weight is the product of a sentence's boosts.
func weight(f features, user bool) float64 {
	w := 1.0
	if user {
		w *= userBoost
	}
	if f.named {
		w *= namedBoost
	}
	if f.numeric {
		w *= numericBoost
	}
	if len(f.terms) < minShortLen {
		w *= shortPenalty
	}
	return w
}

// ranking is the sentences in the order pick considers them: the head,
// the MaxRanked best by TF-IDF score (the mean weight of their terms,
// boosted), with their TextRank centrality (boosted); then the tail, the
// rest, best TF-IDF score first (ties to the earlier sentence).
type ranking struct {
	head  []int
	score []float64 // of head[k]
	tail  []int
}

// rank ranks the sentences of vs.
func rank(vs []vector, boosts []float64) ranking {
	base, boosted := make([]float64, len(vs)), make([]float64, len(vs))
	for i, v := range vs {
		if len(v.w) > 0 {
			base[i] = v.norm / math.Sqrt(float64(len(v.w)))
			boosted[i] = base[i] * boosts[i]
		}
	}
	order := byScore(boosted)
	r := ranking{head: slices.Clone(order[:min(len(order), MaxRanked)]), tail: order[min(len(order), MaxRanked):]}
	slices.Sort(r.head) // TextRank over the head in source order
	central := textRank(vs, r.head)
	maxC, maxB := slices.Max(append([]float64{1e-9}, central...)), slices.Max(append([]float64{1e-9}, base...))
	r.score = make([]float64, len(r.head))
	for k, i := range r.head {
		r.score[k] = (centralShare*central[k]/maxC + (1-centralShare)*base[i]/maxB) * boosts[i]
	}
	return r
}

// best is the sentence ranked first.
func (r ranking) best() int {
	return r.head[byScore(r.score)[0]]
}

// byScore is the indexes of score, highest score first, ties in index order.
func byScore(score []float64) []int {
	idx := make([]int, len(score))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case score[a] > score[b]:
			return -1
		case score[a] < score[b]:
			return 1
		}
		return 0
	})
	return idx
}

// textRank is the PageRank of the sentences in set over the graph whose
// edges are their cosine similarities: a sentence much like many others
// states what the conversation is about. A sentence alike to none keeps
// the base (1-damping) score.
func textRank(vs []vector, set []int) []float64 {
	n := len(set)
	sim := make([][]float64, n)
	out := make([]float64, n) // total edge weight of each sentence
	for a := range set {
		sim[a] = make([]float64, n)
	}
	for a := range set {
		for b := a + 1; b < n; b++ {
			s := cosine(vs[set[a]], vs[set[b]])
			sim[a][b], sim[b][a] = s, s
			out[a] += s
			out[b] += s
		}
	}
	rankv := make([]float64, n)
	for i := range rankv {
		rankv[i] = 1
	}
	next := make([]float64, n)
	for range rankRounds {
		for a := range n {
			sum := 0.0
			for b := range n {
				if sim[b][a] > 0 {
					sum += sim[b][a] / out[b] * rankv[b]
				}
			}
			next[a] = (1 - damping) + damping*sum
		}
		rankv, next = next, rankv
	}
	return rankv
}
