package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	pgv "github.com/pgvector/pgvector-go"
)

// Quality checks that the service returns the owner's true top-10.
type Quality struct {
	Queries int `json:"queries"`
	// RecallAt10 is the mean share of the brute-force top-10 (by cosine
	// distance over all the owner's active rows, computed here in Go) that
	// the service's vector search returned; MinRecall the worst single query.
	RecallAt10 float64 `json:"recallAt10"`
	MinRecall  float64 `json:"minRecall"`
	// SmallOwnersComplete: each owner with fewer than 10 memories got all of
	// them from vector search, hybrid search and context.
	SmallOwnersComplete bool     `json:"smallOwnersComplete"`
	SmallOwnerProblems  []string `json:"smallOwnerProblems,omitempty"`
}

// tieTolerance: a returned row whose distance equals the 10th true distance
// within this counts as correct (equal distances may come in either order).
const tieTolerance = 1e-6

type ownerRow struct {
	id  string
	vec []float32
}

// quality measures recall@10 over RecallQueries searches, spread over the
// large owners (one brute-force read of each owner's rows serves several
// queries), and checks the small owners.
func (h *harness) quality(ctx context.Context, api *apiClient, raw *rawSQL) (Quality, error) {
	q := Quality{MinRecall: 1, SmallOwnersComplete: true}
	rng := rand.New(rand.NewPCG(99, 1))
	perOwner := max(1, h.scale.RecallQueries/h.scale.Owners)
	owners := min(h.scale.Owners, (h.scale.RecallQueries+perOwner-1)/perOwner)
	var sum float64
	for o := range owners {
		owner := ownerName(o)
		rows, err := ownerRows(ctx, raw, owner)
		if err != nil {
			return q, err
		}
		for range perOwner {
			text := h.corpus.query(rng, owner, rng.IntN(h.scale.PerOwner))
			r, err := recallOne(ctx, api, raw, owner, text, rows)
			if err != nil {
				return q, err
			}
			sum += r
			q.MinRecall = math.Min(q.MinRecall, r)
			q.Queries++
		}
	}
	if q.Queries > 0 {
		q.RecallAt10 = round3(sum / float64(q.Queries))
	}
	for i, n := range h.scale.SmallOwners {
		for _, p := range smallOwnerProblems(ctx, api, smallName(i), n) {
			q.SmallOwnersComplete = false
			q.SmallOwnerProblems = append(q.SmallOwnerProblems, p)
		}
	}
	return q, nil
}

// ownerRows reads every active, unexpired row of owner (the brute-force set).
func ownerRows(ctx context.Context, raw *rawSQL, owner string) ([]ownerRow, error) {
	rows, err := raw.pool.Query(ctx, `SELECT id::text, embedding FROM `+raw.memories+`
		WHERE owner_id = $1 AND active AND (expires_at IS NULL OR expires_at > now())`, owner)
	if err != nil {
		return nil, fmt.Errorf("reading %s for brute force: %w", owner, err)
	}
	defer rows.Close()
	var out []ownerRow
	for rows.Next() {
		var r ownerRow
		var v pgv.Vector
		if err := rows.Scan(&r.id, &v); err != nil {
			return nil, err
		}
		r.vec = v.Slice()
		out = append(out, r)
	}
	return out, rows.Err()
}

// recallOne compares one service vector search with brute force.
func recallOne(ctx context.Context, api *apiClient, raw *rawSQL, owner, text string, rows []ownerRow) (float64, error) {
	vecs, err := raw.embedder.Embed(ctx, []string{text})
	if err != nil {
		return 0, err
	}
	dist := make(map[string]float64, len(rows))
	all := make([]float64, 0, len(rows))
	for _, r := range rows {
		d := cosineDistance(vecs[0], r.vec)
		dist[r.id] = d
		all = append(all, d)
	}
	sort.Float64s(all)
	want := min(topK, len(all))
	if want == 0 {
		return 1, nil
	}
	kth := all[want-1]
	var res apiSearchResult
	if err := api.post(ctx, ownerPath(owner, "/search"), map[string]any{"query": text, "mode": "vector", "topK": topK}, &res); err != nil {
		return 0, err
	}
	hit := 0
	for _, r := range res.Results {
		if d, ok := dist[r.Memory.ID]; ok && d <= kth+tieTolerance {
			hit++
		}
	}
	return float64(min(hit, want)) / float64(want), nil
}

func cosineDistance(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 1
	}
	return 1 - dot/math.Sqrt(na*nb)
}

// smallOwnerProblems checks that an owner with n < 10 memories gets all n
// from vector search, hybrid search and context.
func smallOwnerProblems(ctx context.Context, api *apiClient, owner string, n int) []string {
	var out []string
	for _, mode := range []string{"vector", "hybrid"} {
		var res apiSearchResult
		err := api.post(ctx, ownerPath(owner, "/search"), map[string]any{"query": "user prefers", "mode": mode, "topK": topK}, &res)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s %s search: %v", owner, mode, err))
		case len(res.Results) != n:
			out = append(out, fmt.Sprintf("%s %s search: %d of %d memories", owner, mode, len(res.Results), n))
		}
	}
	var cres apiContextResult
	err := api.post(ctx, ownerPath(owner, "/context"), map[string]any{"maxTokens": 4000}, &cres)
	switch {
	case err != nil:
		out = append(out, fmt.Sprintf("%s context: %v", owner, err))
	case len(cres.IDs) != n:
		out = append(out, fmt.Sprintf("%s context: %d of %d memories", owner, len(cres.IDs), n))
	}
	return out
}
