package controller

import (
	"strings"
	"testing"
)

// Two attempts that failed the same way must give the same condition
// message, or each retry rewrites the status.
func TestStableMessage(t *testing.T) {
	a := stableMessage("failed to connect: 127.0.0.1:5432 (127.0.0.1): failed to receive message: read tcp 127.0.0.1:54212->127.0.0.1:5432: read: connection reset by peer")
	b := stableMessage("failed to connect: 127.0.0.1:5432 (127.0.0.1): failed to receive message: read tcp 127.0.0.1:40001->127.0.0.1:5432: read: connection reset by peer")
	if a != b {
		t.Errorf("messages differ:\n%s\n%s", a, b)
	}
	if want := "read tcp 127.0.0.1:5432: read: connection reset by peer"; !strings.Contains(a, want) {
		t.Errorf("%q lost the remote address (want %q)", a, want)
	}
}

// A note over the API server's limit would be refused and the event lost.
func TestNoteFitsTheAPILimit(t *testing.T) {
	long := strings.Repeat("created role é; ", 200)
	n := note("schema x: %s", long)
	if len(n) > noteLimit || !strings.HasPrefix(n, "schema x: created role") || !strings.HasSuffix(n, "…") {
		t.Errorf("note of %d bytes: %q", len(n), n[max(0, len(n)-40):])
	}
	if short := note("a %d", 1); short != "a 1" {
		t.Errorf("short note = %q", short)
	}
}
