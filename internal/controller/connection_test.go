package controller

import (
	"strings"
	"testing"
	"unicode/utf8"
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

// TestStableMessageIsCut (issue 26's eighth review, LOW): a tenant's own
// server answered with an 8 MiB error text, which went whole into the
// runtime's condition; the CRD refused the status write (32,768
// characters a message) and the runtime kept a stale status. The message
// is cut now, on a character boundary.
func TestStableMessageIsCut(t *testing.T) {
	long := "provisioning schema \"x\": ERROR: " + strings.Repeat("é", 4<<20)
	got := stableMessage(long)
	if len(got) > maxErrorDetail+len(" …(cut)") || !strings.HasSuffix(got, " …(cut)") || !utf8.ValidString(got) {
		t.Fatalf("cut message: %d bytes, suffix %q, valid UTF-8 %v; want at most %d bytes, cut on a character", len(got), got[max(0, len(got)-12):], utf8.ValidString(got), maxErrorDetail+len(" …(cut)"))
	}
	if short := "connection refused"; stableMessage(short) != short {
		t.Fatalf("a short message changed: %q", stableMessage(short))
	}
}
