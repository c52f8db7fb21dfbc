package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMintCommand: `manager token mint` prints a token the service's
// verifier accepts, bound and named as asked; bad flags exit 2.
func TestMintCommand(t *testing.T) {
	key, err := NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "signing-key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	var out, errOut strings.Builder
	code := Main([]string{"mint", "--signing-key-file", path, "--owner", "alice", "--subject", "backend/alice", "--ttl", "30m"}, &out, &errOut, clock)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	keys, _ := ParseSigningKeys([]byte(key))
	c, err := keys.Verify(strings.TrimSpace(out.String()), now.Add(29*time.Minute))
	if err != nil || c.Role != RoleAgent || c.Owner != "alice" || c.ID != "backend/alice" {
		t.Fatalf("minted %q: %+v %v", out.String(), c, err)
	}
	if _, err := keys.Verify(strings.TrimSpace(out.String()), now.Add(30*time.Minute)); err == nil {
		t.Fatal("the token outlives --ttl")
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mint", "--signing-key-file", path}, 2, "--subject are required"},
		{[]string{"mint", "--signing-key-file", path, "--subject", "s", "--ttl", "48h"}, 1, "24h"},
		{[]string{"mint", "--signing-key-file", path, "--subject", "s", "--role", "admin"}, 1, "agent or app"},
		{[]string{"mint", "--signing-key-file", "/nonexistent", "--subject", "s"}, 1, "reading the signing key"},
		{[]string{"mint", "--bogus"}, 2, "bogus"},
		{[]string{"forge"}, 2, "unknown command"},
		{[]string{"new", "--role", "root"}, 2, "admin, app or agent"},
		{nil, 2, "Usage"},
	} {
		out.Reset()
		errOut.Reset()
		if code := Main(tc.args, &out, &errOut, clock); code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
	}

	out.Reset()
	if code := Main([]string{"new", "--role", "agent", "--owner", "bob", "--name", "bot"}, &out, &errOut, clock); code != 0 {
		t.Fatalf("new: exit %d %s", code, errOut.String())
	}
	set, skipped := ParseTokens([]byte(out.String()))
	if set.Len() != 1 || len(skipped) != 0 || !strings.HasSuffix(strings.TrimSpace(out.String()), " role=agent owner=bob name=bot") {
		t.Fatalf("new printed %q (skipped %+v)", out.String(), skipped)
	}
}
