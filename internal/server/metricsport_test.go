package server

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestMetricsNotOnAPIPort: /metrics answers 404 on the API port, with or
// without a token, and is served on the metrics listener, which serves
// nothing else; it names no owner, token or content, and its tenant-wide
// counts are those GET /v1/stats gives an admin.
func TestMetricsNotOnAPIPort(t *testing.T) {
	tn := newTenant(t)
	tok := newTestToken(t)
	srv := tn.serve(t, serverSetup{
		tokens: []string{tok + " role=agent name=visible-token-name"}})
	const owner, content = "owner-zq7", "Zq7 keeps a diary in a locked drawer"
	srv.do(t, req{method: "POST", path: memPath(owner, "memories"), token: tok, body: map[string]any{"content": content}}).want(t, 201)

	for _, token := range []string{"", srv.token} {
		r := srv.do(t, req{method: "GET", path: "/metrics", noAuth: token == "", token: token}).want(t, 404)
		if p := r.problem(t); p.Type != ProblemBase+"route-not-found" {
			t.Fatalf("GET /metrics on the API port: %+v", p)
		}
	}

	m := srv.scrape(t)
	if !strings.Contains(m, `engram_http_requests_total{code="201",method="POST",route="POST /v1/owners/{owner}/memories"} 1`) {
		t.Error("the metrics listener does not serve the request counters")
	}
	for _, secret := range []string{owner, "visible-token-name", "test-admin", "diary", tok, srv.token} {
		if strings.Contains(m, secret) {
			t.Errorf("the metrics contain %q", secret)
		}
	}
	var st memory.Stats
	srv.do(t, req{method: "GET", path: "/v1/stats"}).want(t, 200).decode(t, &st)
	if got := metricValue(t, m, `engram_memories{state="active"}`); int64(got) != st.Active {
		t.Errorf("engram_memories{state=active} %d, /v1/stats says %d", got, st.Active)
	}

	for _, path := range []string{memPath(owner, "memories"), "/healthz", "/openapi.json", "/mcp"} {
		resp, err := srv.client.Get(srv.metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("the metrics listener answers %s with %d, want 404", path, resp.StatusCode)
		}
	}
}
