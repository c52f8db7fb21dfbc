package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// The rerank part measures what a reranker adds to a hybrid search: one
// owner's memories, searched in turns with "rerank": false and with the
// policy's reranker, a fake /rerank server in this process that answers at
// once. The difference is Engram's own cost of the second stage (the
// wider first stage, the request with topN documents, decoding, reordering),
// not a model's: a real reranker adds its inference time on top.
const (
	rerankMemories = 500
	rerankTopN     = memory.DefaultRerankTopN
	rerankTopK     = 10
	rerankSearches = 300 // of each kind
)

// RerankReport is the rerank part.
type RerankReport struct {
	Memories int `json:"memories"`
	TopN     int `json:"topN"`
	TopK     int `json:"topK"`
	Searches int `json:"searches"`
	// Plain is hybrid search with rerank false, Reranked with the
	// reranker; Wide is rerank false with topK = topN: the first stage of
	// a reranked search alone.
	Plain    Latency `json:"plain"`
	Wide     Latency `json:"wide"`
	Reranked Latency `json:"reranked"`
	// AddedP50Ms and AddedP99Ms are Reranked minus Plain.
	AddedP50Ms float64 `json:"addedP50Ms"`
	AddedP99Ms float64 `json:"addedP99Ms"`
	// Fallbacks counts reranked searches that answered reranked false.
	Fallbacks int `json:"fallbacks"`
}

// fakeRerankServer ranks the documents it is sent in reverse, at once.
func fakeRerankServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Documents []string `json:"documents"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := make([]map[string]any, len(in.Documents))
		for i := range in.Documents {
			out[i] = map[string]any{"index": len(in.Documents) - 1 - i, "relevance_score": 1 - float64(i)/float64(len(in.Documents))}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": out})
	}))
}

func (h *harness) runRerank(ctx context.Context) (*RerankReport, error) {
	_, loginURL, drop, err := h.tenantDatabase(ctx, "rerank", "rerank database", benchSchema)
	defer drop()
	if err != nil {
		return nil, err
	}
	fake := fakeRerankServer() // httptest listens on 127.0.0.1
	defer fake.Close()
	policy := benchPolicy()
	policy.Reranking = &memory.Reranking{Endpoint: fake.URL + "/rerank", TopN: rerankTopN, Timeout: "2s"}
	svc, err := h.startService(ctx, "rerank", loginURL, policy, false)
	if err != nil {
		return nil, err
	}
	defer svc.stop()
	const owner = "rerank-owner"
	for from := 0; from < rerankMemories; from += loadBatch {
		if _, err := h.loadOne(ctx, svc.api, loadTask{owner: owner, from: from, to: min(from+loadBatch, rerankMemories)}); err != nil {
			return nil, fmt.Errorf("loading: %w", err)
		}
	}
	h.logf("rerank: %d memories loaded; %d hybrid searches each without and with the reranker (topN %d)", rerankMemories, rerankSearches, rerankTopN)
	rep := &RerankReport{Memories: rerankMemories, TopN: rerankTopN, TopK: rerankTopK, Searches: rerankSearches}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var plain, wide, reranked []time.Duration
	rng := rngFor("rerank")
	kinds := []struct {
		topK   int
		rerank bool
		into   *[]time.Duration
	}{{rerankTopK, false, &plain}, {rerankTopN, false, &wide}, {rerankTopK, true, &reranked}}
	// In turns, so a change of the machine's load hits every kind alike.
	for i := range rerankSearches {
		q := h.corpus.query(rng, owner, i%rerankMemories)
		for _, k := range kinds {
			var res memory.SearchResult
			start := time.Now()
			if err := svc.api.post(ctx, ownerPath(owner, "/search"), map[string]any{"query": q, "topK": k.topK, "rerank": k.rerank}, &res); err != nil {
				return rep, err
			}
			*k.into = append(*k.into, time.Since(start))
			if k.rerank && (res.Reranked == nil || !*res.Reranked) {
				rep.Fallbacks++
			}
		}
	}
	rep.Plain, rep.Wide, rep.Reranked = summarize(plain), summarize(wide), summarize(reranked)
	rep.AddedP50Ms = round3(rep.Reranked.P50 - rep.Plain.P50)
	rep.AddedP99Ms = round3(rep.Reranked.P99 - rep.Plain.P99)
	h.logf("rerank: hybrid p50 %.2f ms plain, %.2f ms with topK %d, %.2f ms reranked (+%.2f ms); p99 %.2f / %.2f / %.2f ms; %d fallbacks",
		rep.Plain.P50, rep.Wide.P50, rerankTopN, rep.Reranked.P50, rep.AddedP50Ms, rep.Plain.P99, rep.Wide.P99, rep.Reranked.P99, rep.Fallbacks)
	if rep.Fallbacks > 0 {
		return rep, fmt.Errorf("%d of %d reranked searches fell back to the first-stage order against a fake that answers at once", rep.Fallbacks, rerankSearches)
	}
	return rep, nil
}

func rerankMarkdown(p printer, r *RerankReport) {
	p("## Reranking overhead\n\n")
	p("One owner of %d memories; %d hybrid searches (topK %d) with `rerank: false`, as many with topK = topN, and as many reranked (topN %d candidates), in turns, one at a time, "+
		"against a fake `/rerank` server in the bench process that answers at once: the added time is Engram's part of the second stage "+
		"(wider first stage, request, decoding, reordering), a real reranker's inference comes on top.\n\n", r.Memories, r.Searches, r.TopK, r.TopN)
	p("| search | p50 ms | p95 ms | p99 ms | max ms |\n|---|---|---|---|---|\n")
	p("| hybrid, rerank false | %.2f | %.2f | %.2f | %.2f |\n", r.Plain.P50, r.Plain.P95, r.Plain.P99, r.Plain.Max)
	p("| hybrid topK %d, rerank false (the first stage alone) | %.2f | %.2f | %.2f | %.2f |\n", r.TopN, r.Wide.P50, r.Wide.P95, r.Wide.P99, r.Wide.Max)
	p("| hybrid, reranked | %.2f | %.2f | %.2f | %.2f |\n", r.Reranked.P50, r.Reranked.P95, r.Reranked.P99, r.Reranked.Max)
	p("| added by reranking | %+.2f | | %+.2f | |\n\n", r.AddedP50Ms, r.AddedP99Ms)
}
