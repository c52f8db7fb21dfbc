package server

import (
	"net/url"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestFiltersRESTAndMCP: search's body, list's filter= and the MCP tools
// take one filter grammar; a filter that cannot be evaluated is 422 naming
// the offending part.
func TestFiltersRESTAndMCP(t *testing.T) {
	_, srv := newServedTenant(t)
	var lisbon memory.AddResult
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: `{"content": "Alice flies to Lisbon", "metadata": {"trip": "lisbon"}, "tags": ["travel"]}`}).want(t, 201).decode(t, &lisbon)
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: `{"content": "Alice flies to Porto", "metadata": {"trip": "porto"}, "tags": ["travel"]}`}).want(t, 201)
	filter := `{"and": [{"tags": {"eq": "travel"}}, {"metadata": {"key": "trip", "in": ["lisbon", "rome"]}}]}`

	var res searchResponse
	srv.do(t, req{method: "POST", path: memPath("alice", "search"), body: `{"query": "Alice flies", "filter": ` + filter + `}`}).want(t, 200).decode(t, &res)
	if len(res.Results) != 1 || res.Results[0].Memory.ID != lisbon.Memory.ID {
		t.Fatalf("filtered search: %+v", res.Results)
	}
	var page memory.ListPage
	srv.do(t, req{method: "GET", path: memPath("alice", "memories") + "?filter=" + url.QueryEscape(filter)}).want(t, 200).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].ID != lisbon.Memory.ID {
		t.Fatalf("filtered list: %+v", page.Items)
	}
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", memPath("alice", "search"), `{"query": "x", "filter": {"metadata": {"key": "trip", "eq": ["a"]}}}`, "filter.metadata.eq"},
		{"POST", memPath("alice", "search"), `{"query": "x", "filter": {"or": [{"tags": {"eq": "a"}}, {"tags": {"like": "a"}}]}}`, "like"},
		{"GET", memPath("alice", "memories") + "?filter=" + url.QueryEscape(`{"not": {}}`), "", "filter.not"},
		{"GET", memPath("alice", "memories") + "?filter=" + url.QueryEscape(`{"tags": {"op": 1}}`), "", "filter"},
	} {
		r := req{method: c.method, path: c.path}
		if c.body != "" {
			r.body = c.body
		}
		p := srv.do(t, r).want(t, 422).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Field != c.field {
			t.Errorf("%s %s %s: errors %+v, want one on %s", c.method, c.path, c.body, p.Errors, c.field)
		}
	}

	session := mcpSession(t, srv, srv.token)
	var mres searchResponse
	callTool(t, session, "search_memory", map[string]any{"owner": "alice", "query": "Alice flies",
		"filter": map[string]any{"metadata": map[string]any{"key": "trip", "eq": "lisbon"}}}, &mres)
	if len(mres.Results) != 1 || mres.Results[0].Memory.ID != lisbon.Memory.ID {
		t.Fatalf("search_memory with a filter: %+v", mres.Results)
	}
	callTool(t, session, "list_memories", map[string]any{"owner": "alice",
		"filter": map[string]any{"not": map[string]any{"metadata": map[string]any{"key": "trip", "eq": "lisbon"}}}}, &page)
	if len(page.Items) != 1 || page.Items[0].ID == lisbon.Memory.ID {
		t.Fatalf("list_memories with a filter: %+v", page.Items)
	}
	bad := callToolRaw(t, session, "search_memory", map[string]any{"owner": "alice", "query": "x",
		"filter": map[string]any{"tags": map[string]any{"eq": 3}}})
	if !bad.IsError || !strings.Contains(text(bad), "filter.tags.eq") {
		t.Fatalf("a bad filter over MCP: %s", text(bad))
	}
}
