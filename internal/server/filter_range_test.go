package server

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestFilterRangesAndContextRESTAndMCP: ranges and timestamp conditions
// work in search's body, list's filter= and the MCP tools; context takes a
// filter in REST and MCP; a bound that is not a number or RFC 3339 is 422
// naming the part; the MCP tools' input schemas spell out openapi.yaml's
// filter grammar.
func TestFilterRangesAndContextRESTAndMCP(t *testing.T) {
	_, srv := newServedTenant(t)
	var cheap, dear memory.AddResult
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: `{"content": "Alice's hostel in Lisbon costs 30 euros", "metadata": {"price": 30, "booked": "2026-03-01T10:00:00Z"}}`}).want(t, 201).decode(t, &cheap)
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: `{"content": "Alice's hotel in Porto costs 120 euros", "metadata": {"price": 120, "booked": "2026-05-01T10:00:00Z"}}`}).want(t, 201).decode(t, &dear)
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: `{"content": "Alice's price notes say cheap", "metadata": {"price": "cheap"}}`}).want(t, 201)
	only := func(what string, got []string, want string) {
		t.Helper()
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: %v, want [%s]", what, got, want)
		}
	}
	hitIDs := func(r searchResponse) []string {
		var out []string
		for _, h := range r.Results {
			out = append(out, h.Memory.ID)
		}
		return out
	}
	listIDs := func(p memory.ListPage) []string {
		var out []string
		for _, m := range p.Items {
			out = append(out, m.ID)
		}
		return out
	}

	var res searchResponse
	srv.do(t, req{method: "POST", path: memPath("alice", "search"),
		body: `{"query": "Alice costs", "filter": {"metadata": {"key": "price", "lt": 100}}}`}).want(t, 200).decode(t, &res)
	only("search price < 100", hitIDs(res), cheap.Memory.ID)
	var page memory.ListPage
	srv.do(t, req{method: "GET", path: memPath("alice", "memories") + "?filter=" +
		url.QueryEscape(`{"and": [{"createdAt": {"gte": "2026-01-01T00:00:00Z"}}, {"metadata": {"key": "booked", "gt": "2026-04-01T00:00:00+02:00"}}]}`)}).want(t, 200).decode(t, &page)
	only("list booked after April", listIDs(page), dear.Memory.ID)
	var ctxRes memory.ContextResult
	srv.do(t, req{method: "POST", path: memPath("alice", "context"),
		body: `{"query": "hotel", "filter": {"metadata": {"key": "price", "gte": 100}}}`}).want(t, 200).decode(t, &ctxRes)
	only("context price >= 100", ctxRes.IDs, dear.Memory.ID)

	for _, c := range []struct{ method, path, body, field string }{
		{"POST", memPath("alice", "search"), `{"query": "x", "filter": {"and": [{"metadata": {"key": "price", "gt": "cheap"}}]}}`, "filter.and[0].metadata.gt"},
		{"POST", memPath("alice", "context"), `{"filter": {"updatedAt": {"lt": "yesterday"}}}`, "filter.updatedAt.lt"},
		{"GET", memPath("alice", "memories") + "?filter=" + url.QueryEscape(`{"createdAt": {"gt": 1}}`), "", "filter.createdAt.gt"},
	} {
		p := srv.do(t, req{method: c.method, path: c.path, body: c.body}).want(t, 422).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Field != c.field {
			t.Errorf("%s %s %s: errors %+v, want one on %s", c.method, c.path, c.body, p.Errors, c.field)
		}
	}

	session := mcpSession(t, srv, srv.token)
	var mres searchResponse
	callTool(t, session, "search_memory", map[string]any{"owner": "alice", "query": "Alice costs",
		"filter": map[string]any{"metadata": map[string]any{"key": "price", "gt": 100}}}, &mres)
	only("search_memory price > 100", hitIDs(mres), dear.Memory.ID)
	callTool(t, session, "list_memories", map[string]any{"owner": "alice",
		"filter": map[string]any{"metadata": map[string]any{"key": "booked", "lt": "2026-04-01T00:00:00Z"}}}, &page)
	only("list_memories booked before April", listIDs(page), cheap.Memory.ID)
	callTool(t, session, "get_context", map[string]any{"owner": "alice",
		"filter": map[string]any{"metadata": map[string]any{"key": "price", "lte": 30}}}, &ctxRes)
	only("get_context price <= 30", ctxRes.IDs, cheap.Memory.ID)
	bad := callToolRaw(t, session, "get_context", map[string]any{"owner": "alice",
		"filter": map[string]any{"metadata": map[string]any{"key": "price", "gt": true}}})
	if !bad.IsError || !strings.Contains(text(bad), "gt") {
		t.Errorf("a bad range over MCP: %s", text(bad))
	}

	tools, err := session.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if !slices.Contains([]string{"search_memory", "list_memories", "get_context"}, tool.Name) {
			continue
		}
		js, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties map[string]struct {
				Ref string `json:"$ref"`
			} `json:"properties"`
			Defs map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"$defs"`
		}
		if err := json.Unmarshal(js, &s); err != nil {
			t.Fatal(err)
		}
		if s.Properties["filter"].Ref != "#/$defs/Filter" || s.Defs["Filter"].Properties["createdAt"] == nil ||
			s.Defs["FilterCondition"].Properties["gte"] == nil {
			t.Errorf("%s: the filter's input schema does not spell out the grammar: %s", tool.Name, js)
		}
	}
}
