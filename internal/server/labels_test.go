package server

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestMetadataAndTagsREST: metadata and tags are set on add, changed by
// PATCH, returned by get, list and search (the harness checks every answer
// against openapi.yaml), and bad ones are 422 naming the field.
func TestMetadataAndTagsREST(t *testing.T) {
	_, srv := newServedTenant(t)
	var added memory.AddResult
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: `{"content": "Alice flies to Lisbon on 12 May", "metadata": {"source": "email", "ticket": 12345678901234567890}, "tags": ["travel", "2026"]}`}).
		want(t, 201).decode(t, &added)
	if !strings.Contains(string(added.Memory.Metadata), `12345678901234567890`) || strings.Join(added.Memory.Tags, ",") != "travel,2026" {
		t.Fatalf("add answered metadata %s tags %q", added.Memory.Metadata, added.Memory.Tags)
	}
	var m memory.Memory
	srv.do(t, req{method: "PATCH", path: memPath("alice", "memories", added.Memory.ID),
		body: map[string]any{"tags": []string{"travel", "booked"}, "metadata": map[string]any{"source": "call"}}}).want(t, 200).decode(t, &m)
	srv.do(t, req{method: "GET", path: memPath("alice", "memories", added.Memory.ID)}).want(t, 200).decode(t, &m)
	if string(m.Metadata) != `{"source":"call"}` || strings.Join(m.Tags, ",") != "travel,booked" {
		t.Fatalf("after PATCH: metadata %s tags %q", m.Metadata, m.Tags)
	}
	var page memory.ListPage
	srv.do(t, req{method: "GET", path: memPath("alice", "memories")}).want(t, 200).decode(t, &page)
	var res searchResponse
	srv.do(t, req{method: "POST", path: memPath("alice", "search"), body: map[string]any{"query": "Lisbon"}}).want(t, 200).decode(t, &res)
	if len(page.Items) != 1 || page.Items[0].Tags == nil || len(res.Results) != 1 || res.Results[0].Memory.Metadata == nil {
		t.Fatalf("list %+v / search %+v lack the labels", page.Items, res.Results)
	}

	for _, c := range []struct {
		path, body, field string
	}{
		{memPath("bob", "memories"), `{"content": "x", "metadata": [1]}`, "metadata"},
		{memPath("bob", "memories"), `{"content": "x", "tags": ["a", "a"]}`, "tags[1]"},
		{memPath("bob", "memories", "batch"), `{"items": [{"content": "x"}, {"content": "y", "tags": [" y"]}]}`, "items[1].tags[0]"},
		{memPath("alice", "memories", added.Memory.ID), `{"metadata": {"a": {"b": {"c": {"d": {}}}}}}`, "metadata"},
	} {
		method := "POST"
		if strings.Contains(c.path, added.Memory.ID) {
			method = "PATCH"
		}
		p := srv.do(t, req{method: method, path: c.path, body: c.body}).want(t, 422).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Field != c.field {
			t.Errorf("%s %s: errors %+v, want one on %s", method, c.body, p.Errors, c.field)
		}
	}
	srv.do(t, req{method: "GET", path: memPath("bob", "memories")}).want(t, 200).decode(t, &page)
	if len(page.Items) != 0 {
		t.Fatalf("refused writes stored %+v", page.Items)
	}
}

// TestMetadataAndTagsMCP: add_memory takes metadata and tags, bounded the
// same way.
func TestMetadataAndTagsMCP(t *testing.T) {
	_, srv := newServedTenant(t)
	session := mcpSession(t, srv, srv.token)
	var added memory.AddResult
	callTool(t, session, "add_memory", map[string]any{"owner": "alice", "content": "Alice flies to Lisbon",
		"metadata": map[string]any{"source": "chat"}, "tags": []string{"travel"}}, &added)
	var page memory.ListPage
	callTool(t, session, "list_memories", map[string]any{"owner": "alice"}, &page)
	if len(page.Items) != 1 || string(page.Items[0].Metadata) != `{"source":"chat"}` || strings.Join(page.Items[0].Tags, ",") != "travel" {
		t.Fatalf("list_memories: %+v", page.Items)
	}
	bad := callToolRaw(t, session, "add_memory", map[string]any{"owner": "alice", "content": "x", "tags": []string{"a", "a"}})
	if !bad.IsError || !strings.Contains(text(bad), "tags[1]") {
		t.Fatalf("duplicate tags over MCP: %s", text(bad))
	}
}
