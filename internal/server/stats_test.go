package server

import (
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestStats: GET /v1/stats counts active and inactive memories and owners
// of the tenant, for admin tokens only.
func TestStats(t *testing.T) {
	tn := newTenant(t)
	app, adminAlice := newTestToken(t), newTestToken(t)
	srv := tn.serve(t, serverSetup{
		tokens: []string{app + " role=app name=backend", adminAlice + " role=admin owner=alice name=alice-admin"}})

	var st memory.Stats
	srv.do(t, req{method: "GET", path: "/v1/stats"}).want(t, 200).decode(t, &st)
	if st != (memory.Stats{}) {
		t.Fatalf("stats of an empty tenant = %+v", st)
	}

	var ids []string
	for _, m := range []struct{ owner, content string }{
		{"alice", "Alice prefers dark roast coffee"},
		{"alice", "Alice works on the Kubernetes operator project"},
		{"bob", "Bob keeps a cat called Miso"},
	} {
		var res memory.AddResult
		srv.do(t, req{method: "POST", path: memPath(m.owner, "memories"), body: map[string]any{"content": m.content}}).want(t, 201).decode(t, &res)
		ids = append(ids, res.Memory.ID)
	}
	srv.do(t, req{method: "DELETE", path: memPath("bob", "memories", ids[2])}).want(t, 204)

	srv.do(t, req{method: "GET", path: "/v1/stats"}).want(t, 200).decode(t, &st)
	if want := (memory.Stats{Active: 2, Inactive: 1, Owners: 2}); st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}

	if p := srv.do(t, req{method: "GET", path: "/v1/stats", token: app}).want(t, 403).problem(t); p.Type != ProblemBase+"forbidden" {
		t.Errorf("an app token got %+v, want forbidden", p)
	}
	// Tenant-wide counts are not for a token bound to one owner, admin or not.
	if p := srv.do(t, req{method: "GET", path: "/v1/stats", token: adminAlice}).want(t, 403).problem(t); p.Type != ProblemBase+"owner-not-allowed" {
		t.Errorf("an admin token bound to alice got %+v, want owner-not-allowed", p)
	}
	srv.do(t, req{method: "GET", path: "/v1/stats?x=1"}).want(t, 422)
}

// TestProxyAuthorizationHeader: the token in X-Engram-Authorization (what
// kubectl engram sends through the API server's service proxy, which
// strips Authorization) authenticates like Authorization does, and a wrong
// one is refused.
func TestProxyAuthorizationHeader(t *testing.T) {
	_, srv := newServedTenant(t)
	srv.do(t, req{method: "GET", path: "/v1/stats", noAuth: true,
		header: map[string]string{HeaderProxyAuthorization: "Bearer " + srv.token}}).want(t, 200)
	srv.do(t, req{method: "GET", path: "/v1/stats", noAuth: true,
		header: map[string]string{HeaderProxyAuthorization: "Bearer " + newTestToken(t)}}).want(t, 401)
	srv.do(t, req{method: "GET", path: "/v1/stats", noAuth: true}).want(t, 401)
}
