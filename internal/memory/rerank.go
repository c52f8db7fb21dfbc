package memory

import (
	"context"
	"errors"
	"net/http"

	"github.com/engram-dev/engram/internal/memory/modelapi"
)

// Reranker orders documents by relevance to a query (modelapi.Reranker).
type Reranker = modelapi.Reranker

// RerankHit is one document's place in a reranker's answer.
type RerankHit = modelapi.RerankHit

// RerankConfig configures a /rerank client.
type RerankConfig = modelapi.RerankConfig

// NewReranker returns a client of the /rerank API (modelapi.NewReranker).
func NewReranker(cfg RerankConfig, apiKey string, client *http.Client) Reranker {
	return modelapi.NewReranker(cfg, apiKey, client)
}

// Why a search was not reranked (SearchResult.RerankReason). The first
// three are the caller's or the mode's doing; the last three are
// fallbacks: the reranker failed and the first-stage order was returned.
const (
	RerankOptedOut  = "opted-out"        // the request said rerank: false
	RerankTextMode  = "text-mode"        // keyword-only search is never reranked
	RerankNoQuery   = "no-query"         // a client vector without query text: nothing to compare with
	RerankTimeout   = "timeout"          // the reranker took longer than reranking.timeout
	RerankUpstream  = "upstream-error"   // it could not be reached or answered an error status
	RerankMalformed = "malformed-answer" // its answer was no ranking of the documents sent
)

// IsRerankFallback reports whether reason says the reranker failed (as
// opposed to a search that was not meant to be reranked).
func IsRerankFallback(reason string) bool {
	return reason == RerankTimeout || reason == RerankUpstream || reason == RerankMalformed
}

// rerankPlan is whether a search is reranked and with how many candidates.
type rerankPlan struct {
	on     bool
	topN   int
	reason string // why not, when !on and the runtime has a reranker
}

// planRerank decides for one search: never without a reranker (the answer
// then has no reranked field), never for text mode or without query text,
// never when the request opts out.
func (s *reader) planRerank(req SearchRequest, mode SearchMode) rerankPlan {
	r := s.core.Policy.Reranking
	if s.reranker == nil || r == nil {
		return rerankPlan{}
	}
	switch {
	case req.Rerank != nil && !*req.Rerank:
		return rerankPlan{reason: RerankOptedOut}
	case mode == SearchText:
		return rerankPlan{reason: RerankTextMode}
	case req.Query == "":
		return rerankPlan{reason: RerankNoQuery}
	}
	return rerankPlan{on: true, topN: r.TopN}
}

// fetch is how many first-stage results a search with top-K k asks for.
func (p rerankPlan) fetch(k int) int {
	if p.on {
		return max(p.topN, k)
	}
	return k
}

// rerank orders the first topN hits by the reranker, the rest follow in
// first-stage order, cut to k. On any failure it returns the first-stage
// order cut to k and the reason.
func (s *reader) rerank(ctx context.Context, p rerankPlan, query string, hits []SearchHit, k int) ([]SearchHit, string) {
	n := min(p.topN, len(hits))
	if n == 0 {
		return hits, ""
	}
	docs := make([]string, n)
	for i, h := range hits[:n] {
		docs[i] = h.Memory.Content
	}
	ctx, cancel := context.WithTimeout(ctx, s.rerankTimeout)
	defer cancel()
	ranked, err := s.reranker.Rerank(ctx, query, docs)
	if err != nil {
		reason := rerankFailure(ctx, err)
		// The error names the endpoint and what went wrong, never the key
		// (it travels only in the Authorization header).
		s.core.Log.Warn("reranking failed: answering in the first-stage order", "reason", reason, "error", err.Error())
		return hits[:min(k, len(hits))], reason
	}
	out := make([]SearchHit, 0, len(hits))
	placed := make([]bool, n)
	for _, r := range ranked {
		h := hits[r.Index]
		score := r.Score
		h.RerankScore = &score
		out = append(out, h)
		placed[r.Index] = true
	}
	// Candidates the server left out of its answer keep their order after
	// the ranked ones, then the hits beyond topN.
	for i := range n {
		if !placed[i] {
			out = append(out, hits[i])
		}
	}
	out = append(out, hits[n:]...)
	return out[:min(k, len(out))], ""
}

// rerankFailure names a failed rerank call.
func rerankFailure(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, modelapi.ErrRerankMalformed):
		return RerankMalformed
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return RerankTimeout
	default:
		return RerankUpstream
	}
}
