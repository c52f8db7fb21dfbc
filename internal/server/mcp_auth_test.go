package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-dev/engram/internal/memory"
)

// callTool calls a tool that must succeed and decodes its result into out.
func callTool(t *testing.T, session *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res := callToolRaw(t, session, name, args)
	if res.IsError {
		t.Fatalf("%s(%v): tool error %s", name, args, text(res))
	}
	if out != nil {
		js, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(js, out); err != nil {
			t.Fatalf("%s: decoding %s: %v", name, js, err)
		}
	}
}

func callToolRaw(t *testing.T, session *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := session.CallTool(testCtx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// TestMCPOwnerBinding: a session of a token bound to one owner acts for
// that owner whatever the model asks: no owner argument means the bound
// owner, another owner is a tool error, and writes are source agent.
func TestMCPOwnerBinding(t *testing.T) {
	srv := startCredentialServer(t, testConfig)
	srv.do(t, req{method: "POST", path: memPath("bob", "memories"), body: map[string]any{"content": "Bob's door code is in the safe", "category": "project"}}).want(t, 201)

	for name, token := range map[string]string{"static bound token": srv.agentAlice, "signed bound token": srv.signedAlice} {
		t.Run(name, func(t *testing.T) {
			session := mcpSession(t, srv.testServer, token)

			var added memory.AddResult
			callTool(t, session, "add_memory", map[string]any{"content": "Alice likes night trains " + name, "category": "preference"}, &added)
			if added.Memory.Owner != "alice" || added.Memory.Source != memory.SourceAgent {
				t.Fatalf("add_memory without owner = %+v, want alice's, source agent", added.Memory)
			}
			callTool(t, session, "add_memory", map[string]any{"owner": "alice", "content": "Alice reads on trains " + name}, nil)

			for tool, args := range map[string]map[string]any{
				"add_memory":    {"owner": "bob", "content": "Bob x"},
				"search_memory": {"owner": "bob", "query": "door code"},
				"list_memories": {"owner": "bob"},
				"get_context":   {"owner": "bob"},
				"delete_memory": {"owner": "bob", "id": added.Memory.ID},
			} {
				res := callToolRaw(t, session, tool, args)
				if !res.IsError || !strings.Contains(text(res), "bound to one owner") {
					t.Errorf("%s for bob: %s, want a tool error about the binding", tool, text(res))
				}
			}
			res := callToolRaw(t, session, "add_memory", map[string]any{"content": "Alice is vegan", "category": "identity", "source": "user"})
			if !res.IsError || !strings.Contains(text(res), `may not assert source "user"`) {
				t.Errorf("add_memory as user: %s", text(res))
			}
			res = callToolRaw(t, session, "add_memory", map[string]any{"content": "Alice is vegan", "category": "identity"})
			if !res.IsError || !strings.Contains(strings.ToLower(text(res)), "protected") {
				t.Errorf("add_memory into a protected category: %s", text(res))
			}
			var page memory.ListPage
			callTool(t, session, "list_memories", map[string]any{}, &page)
			var res2 searchResponse
			callTool(t, session, "search_memory", map[string]any{"query": "door code"}, &res2)
			for _, m := range append(page.Items, hitsOf(res2)...) {
				if m.Owner != "alice" {
					t.Fatalf("a bound session saw %s's memory", m.Owner)
				}
			}
		})
	}

	// An unbound agent token must name the owner.
	session := mcpSession(t, srv.testServer, srv.agent)
	if res := callToolRaw(t, session, "list_memories", map[string]any{}); !res.IsError || !strings.Contains(text(res), "owner") {
		t.Fatalf("list_memories without owner on an unbound token: %s", text(res))
	}
	var page memory.ListPage
	callTool(t, session, "list_memories", map[string]any{"owner": "bob"}, &page)
	if len(page.Items) != 1 {
		t.Fatalf("unbound agent lists bob: %+v", page.Items)
	}
}

func hitsOf(r searchResponse) []memory.Memory {
	out := make([]memory.Memory, len(r.Results))
	for i, h := range r.Results {
		out[i] = h.Memory
	}
	return out
}

// wantToolErrors calls each tool with its arguments and wants a tool error
// saying want.
func wantToolErrors(t *testing.T, session *mcp.ClientSession, want string, calls map[string]map[string]any) {
	t.Helper()
	for tool, args := range calls {
		toolErrorCase{tool, args, want}.check(t, session)
	}
}

// toolErrorCase is a tool call that must fail with a tool error saying want.
type toolErrorCase struct {
	tool string
	args map[string]any
	want string
}

func (c toolErrorCase) check(t *testing.T, session *mcp.ClientSession) {
	t.Helper()
	res := callToolRaw(t, session, c.tool, c.args)
	if !res.IsError || !strings.Contains(text(res), c.want) {
		t.Errorf("%s(%v) = %s, want a tool error saying %q", c.tool, c.args, text(res), c.want)
	}
}
