package server

import (
	"math"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// clientVector is a unit vector of the tests' dimensions along axis i.
func clientVector(i int) []float32 {
	v := make([]float32, testDims)
	v[i] = 1
	return v
}

// TestClientVectorsREST: an add with the client's embedding and a search
// with its vector call no embedder, and find the memory at distance ~0; a
// wrong dimension is 422 problem+json naming the field with both
// dimensions, and writes nothing.
func TestClientVectorsREST(t *testing.T) {
	tn := newTenant(t)
	emb := newFakeEmbeddings(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: emb.config(tn.schema),
		env: map[string]string{naming.EnvEmbeddingAPIKey: "sk-test"}})

	var added memory.AddResult
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: map[string]any{"content": "Alice flies to Lisbon in May", "embedding": clientVector(3)}}).want(t, 201).decode(t, &added)
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"),
		body: map[string]any{"content": "Alice keeps bees", "embedding": clientVector(7)}}).want(t, 201)
	var res searchResponse
	srv.do(t, req{method: "POST", path: memPath("alice", "search"),
		body: map[string]any{"mode": "vector", "vector": clientVector(3)}}).want(t, 200).decode(t, &res)
	if len(res.Results) == 0 || res.Results[0].Memory.ID != added.Memory.ID || math.Abs(1-res.Results[0].VectorScore) > 1e-6 {
		t.Fatalf("search by the client's vector: %+v, want %s first at distance ~0", res.Results, added.Memory.ID)
	}
	if n := emb.calls.Load(); n != 0 {
		t.Fatalf("the embedder was called %d times", n)
	}

	for _, c := range []struct {
		path, field string
		body        map[string]any
	}{
		{memPath("bob", "memories"), "embedding", map[string]any{"content": "Bob likes tea", "embedding": make([]float32, 5)}},
		{memPath("bob", "memories", "batch"), "items[1].embedding", map[string]any{"items": []any{
			map[string]any{"content": "Bob likes tea", "embedding": clientVector(1)},
			map[string]any{"content": "Bob likes coffee", "embedding": make([]float32, 5)}}}},
		{memPath("bob", "search"), "vector", map[string]any{"query": "tea", "vector": make([]float32, 5)}},
	} {
		p := srv.do(t, req{method: "POST", path: c.path, body: c.body}).want(t, 422).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Field != c.field ||
			!strings.Contains(p.Errors[0].Message, "has 5 dimensions, the runtime's embeddings have 256") {
			t.Errorf("%s: errors %+v, want %s naming both dimensions", c.path, p.Errors, c.field)
		}
	}
	var page memory.ListPage
	srv.do(t, req{method: "GET", path: memPath("bob", "memories")}).want(t, 200).decode(t, &page)
	if len(page.Items) != 0 || emb.calls.Load() != 0 {
		t.Fatalf("refused writes stored %d memories, embedder calls %d", len(page.Items), emb.calls.Load())
	}
	p := srv.do(t, req{method: "POST", path: memPath("bob", "memories"),
		body: `{"content": "x", "embedding": [1e39]}`}).want(t, 422).problem(t)
	if len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0].Field, "embedding") || !strings.Contains(p.Errors[0].Message, "must be a number within the range of float32") {
		t.Errorf("a value beyond float32: %+v", p.Errors)
	}
}

// TestClientVectorsMCP: add_memory and search_memory take the client's
// vectors too.
func TestClientVectorsMCP(t *testing.T) {
	tn := newTenant(t)
	emb := newFakeEmbeddings(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: emb.config(tn.schema),
		env: map[string]string{naming.EnvEmbeddingAPIKey: "sk-test"}})
	session := mcpSession(t, srv, srv.token)
	var added memory.AddResult
	callTool(t, session, "add_memory", map[string]any{"owner": "alice", "content": "Alice flies to Lisbon", "embedding": clientVector(3)}, &added)
	callTool(t, session, "add_memory", map[string]any{"owner": "alice", "content": "Alice keeps bees", "embedding": clientVector(9)}, nil)
	var res searchResponse
	callTool(t, session, "search_memory", map[string]any{"owner": "alice", "mode": "vector", "vector": clientVector(3)}, &res)
	if len(res.Results) == 0 || res.Results[0].Memory.ID != added.Memory.ID {
		t.Fatalf("search_memory by vector: %+v, want %s first", res.Results, added.Memory.ID)
	}
	bad := callToolRaw(t, session, "add_memory", map[string]any{"owner": "alice", "content": "x", "embedding": []float32{1, 2}})
	if !bad.IsError || !strings.Contains(text(bad), "embedding") || !strings.Contains(text(bad), "256") {
		t.Fatalf("a short vector over MCP: %s", text(bad))
	}
	if n := emb.calls.Load(); n != 0 {
		t.Fatalf("the embedder was called %d times", n)
	}
}
