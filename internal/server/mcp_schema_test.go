package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// updateMCPSchemas rewrites testdata/mcp_tools.json from the running server:
//
//	go test ./internal/server/ -run TestMCPToolSchemasUnchanged -update-mcp
var updateMCPSchemas = flag.Bool("update-mcp", false, "rewrite testdata/mcp_tools.json")

// TestMCPToolSchemasUnchanged pins what tools/list publishes (names,
// descriptions, input schemas): agents are configured against it, so a
// refactoring of the handlers must leave it byte for byte the same.
func TestMCPToolSchemasUnchanged(t *testing.T) {
	_, session := startMCP(t)
	tools, err := session.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(tools.Tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	got, err := json.MarshalIndent(tools.Tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "mcp_tools.json")
	if *updateMCPSchemas {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-mcp to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("the MCP tools differ from %s (run with -update-mcp if the change is intended):\n%s", path, got)
	}
}

// startMCP starts a server on a tenant of its own and connects an MCP
// client with the server's token (closed when the test ends).
func startMCP(t *testing.T) (*testServer, *mcp.ClientSession) {
	t.Helper()
	_, srv := newServedTenant(t)
	session := mcpSession(t, srv, srv.token)
	return srv, session
}
