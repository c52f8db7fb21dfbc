package server

import (
	"slices"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestListOwners: GET /v1/owners pages through the owners with their
// counts for admin and app tokens, shows an owner-bound app token its owner
// only, refuses agent tokens and bad tokens, and rejects bad parameters
// with a 422 naming the field.
func TestListOwners(t *testing.T) {
	tn := newTenant(t)
	app, appAlice, agent := newTestToken(t), newTestToken(t), newTestToken(t)
	srv := tn.serve(t, serverSetup{tokens: []string{
		app + " role=app name=backend", appAlice + " role=app owner=alice name=alice-app", agent + " role=agent name=bot"}})
	owners := []string{"alice", "bob", "carol@example.com", "dave"}
	for i, o := range owners {
		for j := 0; j <= i; j++ {
			srv.do(t, req{method: "POST", path: memPath(o, "memories"), body: map[string]any{
				"content": o + " remembers fact number " + string(rune('a'+j)) + " about topic " + string(rune('k'+i))}}).want(t, 201)
		}
	}
	var bobs memory.ListPage
	srv.do(t, req{method: "GET", path: memPath("bob", "memories")}).want(t, 200).decode(t, &bobs)
	srv.do(t, req{method: "DELETE", path: memPath("bob", "memories", bobs.Items[0].ID)}).want(t, 204)

	var seen []memory.OwnerSummary
	cursor := ""
	for range 5 {
		var page memory.OwnersPage
		srv.do(t, req{method: "GET", path: withCursor("/v1/owners?limit=3", cursor), token: app}).want(t, 200).decode(t, &page)
		seen = append(seen, page.Items...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	var names []string
	for _, o := range seen {
		names = append(names, o.Owner)
	}
	if !slices.Equal(names, owners) {
		t.Fatalf("owners %v, want %v", names, owners)
	}
	if b := seen[1]; b.Active != 1 || b.Inactive != 1 {
		t.Fatalf("bob: %+v, want 1 active and 1 inactive", b)
	}
	if d := seen[3]; d.Active != 4 || d.Inactive != 0 {
		t.Fatalf("dave: %+v, want 4 active", d)
	}

	var bound memory.OwnersPage
	srv.do(t, req{method: "GET", path: "/v1/owners", token: appAlice}).want(t, 200).decode(t, &bound)
	if len(bound.Items) != 1 || bound.Items[0].Owner != "alice" {
		t.Fatalf("an app token bound to alice sees %+v, want alice only", bound.Items)
	}

	if p := srv.do(t, req{method: "GET", path: "/v1/owners", token: agent}).want(t, 403).problem(t); p.Type != ProblemBase+"forbidden" {
		t.Fatalf("agent token: %+v", p)
	}
	srv.do(t, req{method: "GET", path: "/v1/owners", token: "not-a-token"}).want(t, 401)
	srv.do(t, req{method: "GET", path: "/v1/owners", noAuth: true}).want(t, 401)
	if r := srv.do(t, req{method: "POST", path: "/v1/owners", body: map[string]any{}}).want(t, 405); r.header.Get("Allow") != "GET" {
		t.Fatalf("Allow = %q, want GET", r.header.Get("Allow"))
	}
	for _, tc := range []struct{ query, field string }{
		{"limit=0x10", "limit"},
		{"limit=501", "limit"},
		{"limit=-1", "limit"},
		{"cursor=%21%21", "cursor"},
		{"owner=alice", "owner"},
		{"limit=1&limit=2", "limit"},
	} {
		p := srv.do(t, req{method: "GET", path: "/v1/owners?" + tc.query}).want(t, 422).problem(t)
		if !hasField(p, tc.field) {
			t.Errorf("?%s: %+v, want an error for %s", tc.query, p, tc.field)
		}
	}
}
