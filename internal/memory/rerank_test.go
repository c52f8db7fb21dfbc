package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/modelapi"
)

// rerankKey is the fake reranker's API key; it must reach the server as a
// Bearer token and nowhere else.
const rerankKey = "rk-test-7f3a91c2-never-log-me"

// fakeReranker is a /rerank server in httptest: answer writes the reply
// to the documents it was sent; it records every request.
type fakeReranker struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []rerankCall
	answer func(w http.ResponseWriter, r *http.Request, docs []string)
}

type rerankCall struct {
	Auth      string
	Model     string   `json:"model"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
	TopN      int      `json:"top_n"`
}

func newFakeReranker(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, docs []string)) *fakeReranker {
	t.Helper()
	f := &fakeReranker{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c rerankCall
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.Auth = r.Header.Get("Authorization")
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		f.answer(w, r, c.Documents)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeReranker) recorded() []rerankCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rerankCall(nil), f.calls...)
}

// reverseAnswer ranks the documents in the reverse of the order sent, in
// the Cohere/Jina shape.
func reverseAnswer(w http.ResponseWriter, _ *http.Request, docs []string) {
	results := make([]map[string]any, len(docs))
	for i := range docs {
		j := len(docs) - 1 - i
		results[i] = map[string]any{"index": j, "relevance_score": float64(i+1) / -10}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
}

// withReranker gives the store the fake as its reranker, topN candidates
// and a 300 ms timeout, logging to logs (when not nil).
func withReranker(f *fakeReranker, topN int, logs *bytes.Buffer) fixtureOption {
	return func(s *fixtureSettings) {
		s.cfg.Policy.Reranking = &Reranking{Endpoint: f.srv.URL + "/rerank", Model: "bge-reranker", TopN: topN, Timeout: "300ms"}
		s.cfg.Reranker = NewReranker(RerankConfig{Endpoint: f.srv.URL + "/rerank", Model: "bge-reranker"}, rerankKey, f.srv.Client())
		if logs != nil {
			s.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		}
	}
}

// seedRerank adds n memories of owner "ann" that all match the query.
func seedRerank(f *fixture, n int) {
	for i := range n {
		f.add(AddRequest{Owner: "ann", Content: fmt.Sprintf("travel note %d: the train to city %c leaves early", i, 'A'+i), Category: "preference"})
	}
}

func contents(hits []SearchHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Memory.Content
	}
	return out
}

// firstStage is the answer without reranking (the request opts out).
func firstStage(t *testing.T, f *fixture, req SearchRequest) []SearchHit {
	t.Helper()
	req.Rerank = new(false)
	res, err := f.store.SearchAnswer(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Results
}

// TestRerankReordersCandidates: vector and hybrid search ask the first
// stage for max(topN, topK) candidates, send topN of them to the reranker
// with the model, the query and the key as a Bearer token, and answer the
// top-K in the reranker's order with its scores.
func TestRerankReordersCandidates(t *testing.T) {
	fake := newFakeReranker(t, reverseAnswer)
	f := newFixture(t, withReranker(fake, 6, nil))
	seedRerank(f, 8)
	for _, mode := range []SearchMode{SearchHybrid, SearchVector} {
		t.Run(string(mode), func(t *testing.T) {
			req := SearchRequest{Owner: "ann", Query: "train to the city", Mode: mode, TopK: 3}
			wide := req
			wide.TopK = 6
			base := contents(firstStage(t, f, wide))
			before := len(fake.recorded())
			res, err := f.store.SearchAnswer(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			calls := fake.recorded()[before:]
			if len(calls) != 1 {
				t.Fatalf("%d rerank calls, want 1", len(calls))
			}
			c := calls[0]
			if c.Auth != "Bearer "+rerankKey || c.Model != "bge-reranker" || c.Query != req.Query || c.TopN != 6 {
				t.Fatalf("rerank request: auth %q model %q query %q top_n %d", c.Auth, c.Model, c.Query, c.TopN)
			}
			if strings.Join(c.Documents, "|") != strings.Join(base, "|") {
				t.Fatalf("documents sent %q, want the first stage's top 6 %q", c.Documents, base)
			}
			want := []string{base[5], base[4], base[3]}
			if got := contents(res.Results); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("reranked results %q, want %q", got, want)
			}
			if res.Reranked == nil || !*res.Reranked || res.RerankReason != "" {
				t.Fatalf("reranked %v reason %q, want true", res.Reranked, res.RerankReason)
			}
			if s := res.Results[0].RerankScore; s == nil || *s != -0.1 {
				t.Fatalf("rerankScore of the first result %v, want -0.1", s)
			}
		})
	}
}

// TestRerankTopNBelowTopK: with topN below topK the reranked candidates
// come first, then the rest of the first stage in its order.
func TestRerankTopNBelowTopK(t *testing.T) {
	fake := newFakeReranker(t, reverseAnswer)
	f := newFixture(t, withReranker(fake, 2, nil))
	seedRerank(f, 5)
	req := SearchRequest{Owner: "ann", Query: "train to the city", TopK: 4}
	base := contents(firstStage(t, f, req))
	res, err := f.store.SearchAnswer(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fake.recorded()[0].Documents); n != 2 {
		t.Fatalf("%d documents sent, want topN = 2", n)
	}
	want := []string{base[1], base[0], base[2], base[3]}
	if got := contents(res.Results); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("results %q, want %q", got, want)
	}
}

// TestRerankTimeoutFallsBack: a reranker slower than reranking.timeout
// costs the search that timeout, no more, and the answer is the
// first-stage order with reranked false and reason timeout.
func TestRerankTimeoutFallsBack(t *testing.T) {
	fake := newFakeReranker(t, func(w http.ResponseWriter, r *http.Request, docs []string) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		reverseAnswer(w, r, docs)
	})
	f := newFixture(t, withReranker(fake, 5, nil))
	seedRerank(f, 5)
	req := SearchRequest{Owner: "ann", Query: "train to the city", TopK: 3}
	base := contents(firstStage(t, f, req))
	start := time.Now()
	res, err := f.store.SearchAnswer(ctx(t), req)
	if err != nil {
		t.Fatalf("a slow reranker must not fail the search: %v", err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("search took %s: the 300ms timeout did not cut the call", took)
	}
	if res.Reranked == nil || *res.Reranked || res.RerankReason != RerankTimeout {
		t.Fatalf("reranked %v reason %q, want false, %q", res.Reranked, res.RerankReason, RerankTimeout)
	}
	if got := contents(res.Results); strings.Join(got, "|") != strings.Join(base, "|") {
		t.Fatalf("results %q, want the first-stage order %q", got, base)
	}
}

// TestRerankMalformedAnswersRefused: an answer that is no ranking of the
// documents sent is refused as a whole (first-stage order, reason
// malformed-answer); an error status is an upstream error. The key is in
// no log line, whatever failed.
func TestRerankMalformedAnswersRefused(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		reason     string
	}{
		{"index out of range", `{"results":[{"index":9,"relevance_score":0.9}]}`, 200, RerankMalformed},
		{"negative index", `{"results":[{"index":-1,"relevance_score":0.9}]}`, 200, RerankMalformed},
		{"duplicate index", `{"results":[{"index":0,"relevance_score":0.9},{"index":0,"relevance_score":0.8}]}`, 200, RerankMalformed},
		{"NaN score", `{"results":[{"index":0,"relevance_score":"NaN"}]}`, 200, RerankMalformed},
		{"missing score", `{"results":[{"index":0}]}`, 200, RerankMalformed},
		{"missing index", `[{"score":0.5}]`, 200, RerankMalformed},
		{"more results than documents", `[{"index":0,"score":1},{"index":1,"score":1},{"index":2,"score":1},{"index":3,"score":1}]`, 200, RerankMalformed},
		{"not JSON", `<html>gateway</html>`, 200, RerankMalformed},
		{"no results field", `{"data":[]}`, 200, RerankMalformed},
		{"too large", `{"results":[],"pad":"` + strings.Repeat("x", modelapi.MaxRerankAnswerBytes) + `"}`, 200, RerankMalformed},
		{"error status", `{"error":"overloaded"}`, 503, RerankUpstream},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeReranker(t, func(w http.ResponseWriter, _ *http.Request, _ []string) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			var logs bytes.Buffer
			f := newFixture(t, withReranker(fake, 3, &logs))
			seedRerank(f, 3)
			req := SearchRequest{Owner: "ann", Query: "train to the city", TopK: 3}
			base := contents(firstStage(t, f, req))
			res, err := f.store.SearchAnswer(ctx(t), req)
			if err != nil {
				t.Fatalf("a bad reranker must not fail the search: %v", err)
			}
			if res.Reranked == nil || *res.Reranked || res.RerankReason != tc.reason {
				t.Fatalf("reranked %v reason %q, want false, %q", res.Reranked, res.RerankReason, tc.reason)
			}
			if got := contents(res.Results); strings.Join(got, "|") != strings.Join(base, "|") {
				t.Fatalf("results %q, want the first-stage order %q", got, base)
			}
			if !strings.Contains(logs.String(), "reranking failed") {
				t.Fatalf("the fallback was not logged: %s", logs.String())
			}
			if strings.Contains(logs.String(), rerankKey) {
				t.Fatalf("the reranker's key is in the logs: %s", logs.String())
			}
		})
	}
}

// TestRerankAcceptsTEIShape: text-embeddings-inference answers a bare
// list with "score"; fewer results than documents are fine (the rest
// follow in first-stage order).
func TestRerankAcceptsTEIShape(t *testing.T) {
	fake := newFakeReranker(t, func(w http.ResponseWriter, _ *http.Request, _ []string) {
		_, _ = w.Write([]byte(`[{"index":2,"score":0.9},{"index":1,"score":0.95}]`))
	})
	f := newFixture(t, withReranker(fake, 3, nil))
	seedRerank(f, 3)
	req := SearchRequest{Owner: "ann", Query: "train to the city", TopK: 3}
	base := contents(firstStage(t, f, req))
	res, err := f.store.SearchAnswer(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{base[1], base[2], base[0]}
	if got := contents(res.Results); strings.Join(got, "|") != strings.Join(want, "|") || !*res.Reranked {
		t.Fatalf("results %q reranked %v, want %q reranked", got, *res.Reranked, want)
	}
	if res.Results[2].RerankScore != nil {
		t.Fatalf("a result the reranker did not score has rerankScore %v", *res.Results[2].RerankScore)
	}
}

// TestRerankSkipped: a request that opts out, keyword-only search and a
// vector search without query text are not reranked, and say why; the
// reranker is not called. Without a reranker the answer has no reranked
// field at all.
func TestRerankSkipped(t *testing.T) {
	fake := newFakeReranker(t, reverseAnswer)
	f := newFixture(t, withReranker(fake, 5, nil))
	seedRerank(f, 3)
	vec, err := f.store.core.Embedder.Embed(ctx(t), []string{"train"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		req    SearchRequest
		reason string
	}{
		{"opted out", SearchRequest{Owner: "ann", Query: "train", Rerank: new(false)}, RerankOptedOut},
		{"text mode", SearchRequest{Owner: "ann", Query: "train", Mode: SearchText}, RerankTextMode},
		{"client vector without query", SearchRequest{Owner: "ann", Vector: vec[0], Mode: SearchVector}, RerankNoQuery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := f.store.SearchAnswer(ctx(t), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reranked == nil || *res.Reranked || res.RerankReason != tc.reason {
				t.Fatalf("reranked %v reason %q, want false, %q", res.Reranked, res.RerankReason, tc.reason)
			}
		})
	}
	if n := len(fake.recorded()); n != 0 {
		t.Fatalf("the reranker was called %d times", n)
	}
	plain := newFixture(t)
	res, err := plain.store.SearchAnswer(ctx(t), SearchRequest{Owner: "ann", Query: "train"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), "rerank") {
		t.Fatalf("an answer without a reranker mentions reranking: %s", b)
	}
}
