package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-dev/engram/internal/memory"
)

// bearerTransport adds the Authorization header, as an agent's MCP client
// configured with a header does.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func connectMCP(t *testing.T, srv *testServer, token string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "engram-test", Version: "v0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   srv.base + "/mcp",
		HTTPClient: &http.Client{Transport: &bearerTransport{token: token, next: http.DefaultTransport}},
		MaxRetries: -1,
	}
	return client.Connect(testCtx(t), transport, nil)
}

// mcpSession connects to srv's /mcp with token, failing the test when it
// cannot; the session is closed when the test ends.
func mcpSession(t *testing.T, srv *testServer, token string) *mcp.ClientSession {
	t.Helper()
	session, err := connectMCP(t, srv, token)
	if err != nil {
		t.Fatalf("connecting to /mcp: %v", err)
	}
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// TestMCP: the official SDK's client connects to /mcp with the bearer
// token, lists the fifteen tools with their argument schemas and calls each
// against the running server; without a token it cannot connect.
func TestMCP(t *testing.T) {
	_, srv := newServedTenant(t)
	ctx := testCtx(t)

	if _, err := connectMCP(t, srv, "wrong"); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("connecting with a wrong token: %v, want a 401 failure", err)
	}

	session := mcpSession(t, srv, srv.token)

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Type       string                     `json:"type"`
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		// owner is optional: a token bound to one owner fixes it.
		if err := json.Unmarshal(schema, &s); err != nil || s.Type != "object" || slices.Contains(s.Required, "owner") || s.Properties["owner"] == nil {
			t.Errorf("tool %s: input schema %s must be an object with an optional owner", tool.Name, schema)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"add_memory", "append_turn", "delete_memory", "expand_summary", "extract_session", "get_context", "get_window",
		"list_memories", "read_constraints", "read_profile", "search_episodes", "search_history", "search_memory", "supersede_memory",
		"update_profile"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out != nil && !res.IsError {
			js, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(js, out); err != nil {
				t.Fatalf("%s: decoding %s: %v", name, js, err)
			}
		}
		return res
	}

	var added memory.AddResult
	if res := call("add_memory", map[string]any{"owner": "hana", "content": "Hana is learning Japanese calligraphy", "category": "project"}, &added); res.IsError {
		t.Fatalf("add_memory: %v", text(res))
	}
	if added.Action != memory.ActionAdded || added.Memory.Owner != "hana" {
		t.Fatalf("add_memory = %+v", added)
	}
	call("add_memory", map[string]any{"owner": "hana", "content": "Hana prefers green tea", "category": "preference"}, nil)

	var found searchResponse
	call("search_memory", map[string]any{"owner": "hana", "query": "calligraphy", "topK": 1}, &found)
	if len(found.Results) != 1 || found.Results[0].Memory.ID != added.Memory.ID {
		t.Fatalf("search_memory = %+v", found)
	}

	var page memory.ListPage
	call("list_memories", map[string]any{"owner": "hana"}, &page)
	if len(page.Items) != 2 {
		t.Fatalf("list_memories = %d items, want 2", len(page.Items))
	}

	var ctxRes memory.ContextResult
	call("get_context", map[string]any{"owner": "hana", "query": "drinks", "maxTokens": 300}, &ctxRes)
	if !strings.Contains(ctxRes.Text, "green tea") {
		t.Fatalf("get_context = %+v", ctxRes)
	}

	// supersede_memory: once, then a conflict the model can read.
	var newer, newest memory.AddResult
	call("add_memory", map[string]any{"owner": "hana", "content": "Hana switched to matcha in spring", "category": "preference"}, &newer)
	call("add_memory", map[string]any{"owner": "hana", "content": "Hana now drinks only water", "category": "preference"}, &newest)
	var retired memory.Memory
	if res := call("supersede_memory", map[string]any{"owner": "hana", "id": newer.Memory.ID, "by": newest.Memory.ID}, &retired); res.IsError || retired.SupersededBy != newest.Memory.ID {
		t.Fatalf("supersede_memory = %+v (%s)", retired, text(res))
	}
	if res := call("supersede_memory", map[string]any{"owner": "hana", "id": newer.Memory.ID, "by": added.Memory.ID}, nil); !res.IsError || !strings.Contains(text(res), "already superseded") {
		t.Fatalf("second supersede_memory: %s, want a conflict", text(res))
	}
	if res := call("supersede_memory", map[string]any{"owner": "hana", "id": "x", "by": newest.Memory.ID}, nil); !res.IsError || !strings.Contains(text(res), "id") {
		t.Fatalf("supersede_memory with a bad id: %s", text(res))
	}
	call("list_memories", map[string]any{"owner": "hana", "includeExpired": true}, &page)
	if len(page.Items) != 3 {
		t.Fatalf("list_memories with includeExpired = %d items, want 3", len(page.Items))
	}

	var del mcpDeleteResult
	call("delete_memory", map[string]any{"owner": "hana", "id": added.Memory.ID}, &del)
	if !del.Deleted {
		t.Fatalf("delete_memory = %+v", del)
	}
	call("list_memories", map[string]any{"owner": "hana"}, &page)
	if len(page.Items) != 2 {
		t.Fatalf("after delete_memory, %d active memories, want 2", len(page.Items))
	}

	// Errors are tool errors the model can read, naming the field.
	res := call("add_memory", map[string]any{"owner": "bad owner!", "content": "x"}, nil)
	if !res.IsError || !strings.Contains(text(res), "owner") {
		t.Fatalf("bad owner: %+v", text(res))
	}
	res = call("delete_memory", map[string]any{"owner": "hana", "id": "not-an-id"}, nil)
	if !res.IsError || !strings.Contains(text(res), "id") {
		t.Fatalf("bad id: %+v", text(res))
	}
	// Arguments that do not fit the schema are rejected by the SDK.
	if res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "search_memory", Arguments: map[string]any{"owner": "hana"}}); err == nil && !res.IsError {
		t.Fatal("search_memory without query succeeded")
	}

	// Stateless: a bare tools/call without initialize works (docs/mcp.md's curl example).
	raw := srv.do(t, req{method: "POST", path: "/mcp", header: map[string]string{"Accept": "application/json, text/event-stream"},
		body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_memories","arguments":{"owner":"hana"}}}`}).want(t, 200)
	if !strings.Contains(string(raw.body), `"id":7`) || !strings.Contains(string(raw.body), "green tea") {
		t.Fatalf("raw tools/call = %s", raw.body)
	}
	// No server-to-client stream: GET is 405, as clients expect.
	srv.do(t, req{method: "GET", path: "/mcp"}).want(t, 405)

	m := srv.scrape(t)
	for _, want := range []string{`engram_mcp_tool_calls_total{outcome="ok",tool="add_memory"} 4`, `engram_mcp_tool_calls_total{outcome="error",tool="supersede_memory"} 2`, `engram_mcp_tool_calls_total{outcome="error",tool="delete_memory"} 1`, `route="POST /mcp"`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
