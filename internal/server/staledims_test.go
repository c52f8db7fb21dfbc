package server

import (
	"strings"
	"testing"
)

// TestStaleDimensionsIs503 (review 13, M1): after a re-embed switched the
// tenant's vectors to another size, a pod still running the old embedder
// has its adds and searches answered 503 with Retry-After (the retry
// reaches a pod of the rollout), naming both sizes, not 500. Any other
// failure keeps its answer: the question is asked only after pgvector's
// data exception.
func TestStaleDimensionsIs503(t *testing.T) {
	tn := newTenant(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: testConfig(tn.schema)})
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
	for _, r := range []*response{
		srv.addMemory(t, "alice", "Alice plays the cello"),
		srv.do(t, req{method: "POST", path: memPath("alice", "search"), body: map[string]any{"query": "cello", "mode": "vector"}}),
	} {
		r.want(t, 503)
		p := r.problem(t)
		if p.Type != ProblemBase+"unavailable" || r.header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "128 dimensions") {
			t.Errorf("problem %+v, Retry-After %q; want unavailable naming the tenant's 128 dimensions", p, r.header.Get("Retry-After"))
		}
	}
	// The same size again: served.
	retype("256")
	srv.addMemory(t, "alice", "Alice plays the cello").want(t, 201)
}
