package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStaleDimensionsIs503 (review 13, M1): after a re-embed switched the
// tenant's vectors to another size, a pod still running the old embedder
// has its adds and searches answered 503 with Retry-After (the retry
// reaches a pod of the rollout), naming both sizes, not 500. Any other
// failure keeps its answer: the question is asked only after pgvector's
// data exception.
func TestStaleDimensionsIs503(t *testing.T) {
	tn, srv := newServedTenant(t)
	srv.addMemory(t, "alice", "Alice plays the viola").want(t, 201)
	// What a dimensions switch leaves for this pod: the tenant's vectors
	// of another size.
	retype := func(dims string) {
		t.Helper()
		if _, err := tn.admin.Exec(testCtx(t), `ALTER TABLE `+tn.schema+`.memories ALTER COLUMN embedding TYPE vector(`+dims+`) USING array_fill(0.1::real, ARRAY[`+dims+`])::vector(`+dims+`)`); err != nil {
			t.Fatal(err)
		}
	}
	retype("128")
	// A flood of failing requests (review 16): each is answered 503, the
	// catalog is read at most once per staleDimensionsFor, and the
	// mismatch is logged once, at error level, with both sizes.
	const flood = 8
	start := time.Now()
	for i := range flood {
		r := srv.addMemory(t, "alice", "Alice plays the cello")
		if i%2 == 1 {
			r = srv.do(t, req{method: "POST", path: memPath("alice", "search"), body: map[string]any{"query": "cello", "mode": "vector"}})
		}
		r.want(t, 503)
		p := r.problem(t)
		if p.Type != ProblemBase+"unavailable" || r.header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "128 dimensions") {
			t.Errorf("problem %+v, Retry-After %q; want unavailable naming the tenant's 128 dimensions", p, r.header.Get("Retry-After"))
		}
	}
	// A read happens only once the kept answer is staleDimensionsFor old:
	// however slow the machine, not more than one per period began.
	periods := 1 + int(time.Since(start)/staleDimensionsFor)
	dims := &srv.proc.Server.dims
	dims.mu.Lock()
	asks := dims.asks
	dims.mu.Unlock()
	if asks < 1 || asks > periods {
		t.Errorf("%d failing requests read the tenant's vector size %d times, want 1..%d (one per %s)", flood, asks, periods, staleDimensionsFor)
	}
	if n := staleDimensionsLogLines(t, srv.logs.String()); n != 1 {
		t.Errorf("the mismatch (tenant 128, embedder 256) was logged %d times at error level, want once", n)
	}
	// The same size again: served.
	retype("256")
	srv.addMemory(t, "alice", "Alice plays the cello").want(t, 201)
}

// staleDimensionsLogLines counts the service's error lines about the
// tenant's 128-dimension vectors and the pod's 256-dimension embedder.
func staleDimensionsLogLines(t *testing.T, logs string) int {
	t.Helper()
	n := 0
	for line := range strings.Lines(logs) {
		var rec struct {
			Level    string `json:"level"`
			Msg      string `json:"msg"`
			Tenant   int    `json:"tenant_dimensions"`
			Embedder int    `json:"embedder_dimensions"`
			Pod      string `json:"pod"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec.Level == "ERROR" && strings.Contains(rec.Msg, "another size than the tenant's") && rec.Tenant == 128 && rec.Embedder == 256 && rec.Pod != "" {
			n++
		}
	}
	return n
}
