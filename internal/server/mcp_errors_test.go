package server

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPToolErrorListsEveryField: an MCP client has no problem document
// and no errors list, only the tool error's text, so a call with several
// invalid arguments gets every field and its message in that text (the
// REST answer to the same input lists the same fields in errors).
func TestMCPToolErrorListsEveryField(t *testing.T) {
	srv, session := startMCP(t)

	args := map[string]any{"content": "Hana likes tea", "category": "no-such-category", "importance": 11, "ttl": "soon"}
	rest := srv.do(t, req{method: "POST", path: memPath("hana", "memories"), body: args}).want(t, 422).problem(t)
	args["owner"] = "hana"
	res, err := session.CallTool(testCtx(t), &mcp.CallToolParams{Name: "add_memory", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	got := text(res)
	if !res.IsError || len(rest.Errors) != 3 {
		t.Fatalf("precondition: a tool error (%v) and a REST problem with 3 fields (%+v)", res.IsError, rest.Errors)
	}
	if !strings.HasPrefix(got, "Invalid input: 3 fields are invalid:\n") {
		t.Errorf("tool error %q does not say how many fields are invalid", got)
	}
	for _, f := range rest.Errors {
		if line := "\n- " + f.Field + ": " + f.Message; !strings.Contains(got, line) {
			t.Errorf("tool error %q lacks the line %q", got, line)
		}
	}
	if strings.Contains(got, "see errors") {
		t.Errorf("tool error %q points to an errors list an MCP client does not have", got)
	}
}
