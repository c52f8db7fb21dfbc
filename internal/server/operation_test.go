package server

import (
	"strings"
	"testing"
)

// TestEveryRouteIsAnOperation: every route of the API space (/v1) is
// registered with handleOp, so the adapter enforces its contract and writes
// its answer; only /mcp (the SDK's handler) is served otherwise.
func TestEveryRouteIsAnOperation(t *testing.T) {
	s := New(Deps{})
	ops := map[string]bool{}
	for _, rt := range s.operations {
		ops[rt.pattern] = true
	}
	for _, pattern := range s.Routes() {
		_, path, _ := strings.Cut(pattern, " ")
		if strings.HasPrefix(path, "/v1/") && !ops[pattern] {
			t.Errorf("%s is not an operation (register it with handleOp)", pattern)
		}
	}
}
