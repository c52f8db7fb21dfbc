package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// serverRerankKey must reach the fake reranker and never the logs, the
// metrics or an answer.
const serverRerankKey = "rk-srv-5d1e0b77-secret"

// rerankServer is a /rerank fake that ranks the documents in reverse while
// broken is false and answers an out-of-range index while it is true; it
// counts the calls that carried the key as a Bearer token.
type rerankServer struct {
	url            string
	broken         atomic.Bool
	calls, withKey atomic.Int64
}

func newRerankServer(t *testing.T) *rerankServer {
	t.Helper()
	rs := &rerankServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.calls.Add(1)
		if r.Header.Get("Authorization") == "Bearer "+serverRerankKey {
			rs.withKey.Add(1)
		}
		var in struct {
			Documents []string `json:"documents"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if rs.broken.Load() {
			_, _ = w.Write([]byte(`{"results":[{"index":99,"relevance_score":1}]}`))
			return
		}
		out := []map[string]any{}
		for i := len(in.Documents) - 1; i >= 0; i-- {
			out = append(out, map[string]any{"index": i, "relevance_score": float64(i)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": out})
	}))
	t.Cleanup(srv.Close)
	rs.url = srv.URL + "/rerank"
	return rs
}

// TestRerankSearchAnswers: over REST and MCP a search is reranked and says
// so; rerank false opts out; a malformed answer falls back to the
// first-stage order with reranked false and a reason, counted in
// engram_rerank_fallbacks_total; every call is timed in
// engram_rerank_duration_seconds; the key goes to the reranker as a Bearer
// token and appears in no log line and no metric.
func TestRerankSearchAnswers(t *testing.T) {
	tn := newTenant(t)
	rs := newRerankServer(t)
	cfg := testConfig(tn.schema)
	cfg.Policy.Reranking = &memory.Reranking{Endpoint: rs.url, Model: "rerank-test", TopN: 10, Timeout: "2s"}
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: cfg,
		env: map[string]string{naming.EnvRerankAPIKey: serverRerankKey}})
	for _, c := range []string{"Alice flies to Lisbon in May", "Alice keeps bees in Lisbon", "Alice reads about Lisbon trams"} {
		srv.do(t, req{method: "POST", path: memPath("alice", "memories"), body: map[string]any{"content": c}}).want(t, 201)
	}
	search := func(body map[string]any) searchResponse {
		t.Helper()
		var res searchResponse
		srv.do(t, req{method: "POST", path: memPath("alice", "search"), body: body}).want(t, 200).decode(t, &res)
		return res
	}
	first := search(map[string]any{"query": "Lisbon", "rerank": false})
	if first.Reranked == nil || *first.Reranked || first.RerankReason != memory.RerankOptedOut || len(first.Results) != 3 {
		t.Fatalf("rerank false: reranked %v reason %q, %d results", first.Reranked, first.RerankReason, len(first.Results))
	}
	res := search(map[string]any{"query": "Lisbon"})
	if res.Reranked == nil || !*res.Reranked || res.Results[0].Memory.ID != first.Results[2].Memory.ID || res.Results[0].RerankScore == nil {
		t.Fatalf("reranked search: reranked %v, first %s, want %s (the first stage's last) with a rerankScore", res.Reranked, res.Results[0].Memory.ID, first.Results[2].Memory.ID)
	}
	session := mcpSession(t, srv, srv.token)
	var mres searchResponse
	callTool(t, session, "search_memory", map[string]any{"owner": "alice", "query": "Lisbon"}, &mres)
	if mres.Reranked == nil || !*mres.Reranked || mres.Results[0].Memory.ID != res.Results[0].Memory.ID {
		t.Fatalf("search_memory: reranked %v, %+v", mres.Reranked, mres.Results)
	}
	callTool(t, session, "search_memory", map[string]any{"owner": "alice", "query": "Lisbon", "rerank": false}, &mres)
	if mres.Reranked == nil || *mres.Reranked || mres.RerankReason != memory.RerankOptedOut {
		t.Fatalf("search_memory with rerank false: reranked %v reason %q", mres.Reranked, mres.RerankReason)
	}

	rs.broken.Store(true)
	bad := search(map[string]any{"query": "Lisbon"})
	if bad.Reranked == nil || *bad.Reranked || bad.RerankReason != memory.RerankMalformed {
		t.Fatalf("a malformed rerank answer: reranked %v reason %q", bad.Reranked, bad.RerankReason)
	}
	for i := range bad.Results {
		if bad.Results[i].Memory.ID != first.Results[i].Memory.ID {
			t.Fatalf("fallback results are not in the first-stage order: %+v", bad.Results)
		}
	}
	if rs.calls.Load() != 3 || rs.withKey.Load() != 3 {
		t.Fatalf("reranker calls %d, %d with the key as Bearer; want 3, 3", rs.calls.Load(), rs.withKey.Load())
	}
	m := srv.scrape(t)
	for _, want := range []string{
		`engram_rerank_fallbacks_total{reason="malformed-answer"} 1`,
		`engram_rerank_fallbacks_total{reason="timeout"} 0`,
		`engram_rerank_duration_seconds_count{outcome="ok"} 2`,
		`engram_rerank_duration_seconds_count{outcome="error"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, serverRerankKey) || strings.Contains(srv.logs.String(), serverRerankKey) {
		t.Fatalf("the reranker's key leaked into the metrics or the logs")
	}
	if !strings.Contains(srv.logs.String(), "reranking failed") {
		t.Fatalf("the fallback was not logged")
	}
}
