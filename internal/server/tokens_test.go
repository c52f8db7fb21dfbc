package server

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestTokensFile: the service loads static tokens with their roles and
// signing keys from their files, refuses short tokens at load with a log
// line naming the line and the reason (never the token), and verifies
// signed tokens with the keys.
func TestTokensFile(t *testing.T) {
	dir := t.TempDir()
	admin, agent := newTestToken(t), newTestToken(t)
	short := "a-token-of-only-30-characters!"
	content := "# comment\n\n  " + admin + " role=admin name=ops \n" + agent + " role=agent owner=alice\r\n" +
		short + "\n#" + newTestToken(t) + "\n"
	tokensPath, keyPath := filepath.Join(dir, "tokens"), filepath.Join(dir, "signing-key")
	key, _ := auth.NewSigningKey()
	for path, s := range map[string]string{tokensPath: content, keyPath: key} {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testenv.SyncBuffer{}
	tk := NewTokens(tokensPath, keyPath, slog.New(slog.NewJSONHandler(logs, nil)), NewMetrics())

	if tk.Count() != 2 || tk.SigningKeys().Len() != 1 {
		t.Fatalf("Count = %d, keys %d; want 2 and 1", tk.Count(), tk.SigningKeys().Len())
	}
	if c, err := tk.Authenticate(admin); err != nil || c.Role != auth.RoleAdmin || c.ID != "ops" {
		t.Errorf("admin token: %+v %v", c, err)
	}
	if c, err := tk.Authenticate(agent); err != nil || c.Role != auth.RoleAgent || c.Owner != "alice" || !strings.HasPrefix(c.ID, "token:") {
		t.Errorf("agent token: %+v %v", c, err)
	}
	for _, bad := range []string{"", short, admin[:len(admin)-1], "#" + admin, "comment"} {
		if c, err := tk.Authenticate(bad); err == nil {
			t.Errorf("Authenticate(%q) = %+v", bad, c)
		}
	}
	log := logs.String()
	if !strings.Contains(log, `"line":5`) || !strings.Contains(log, "shorter than the 43") || strings.Contains(log, short) ||
		strings.Contains(log, admin) || strings.Contains(log, key) {
		t.Errorf("the short token's log line is missing, or a token or key is logged:\n%s", log)
	}

	keys, _ := auth.ParseSigningKeys([]byte(key))
	signed, err := auth.MintAgent(keys.MintKey(), "bob", "backend/bob", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := tk.Authenticate(signed); err != nil || c.Role != auth.RoleAgent || c.Owner != "bob" || c.ID != "backend/bob" {
		t.Errorf("signed token: %+v %v", c, err)
	}
	tk.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := tk.Authenticate(signed); !errors.Is(err, auth.ErrExpired) {
		t.Errorf("expired signed token: %v", err)
	}

	// Without a signing-key file no signed token is accepted.
	none := NewTokens(tokensPath, "", slog.New(slog.DiscardHandler), NewMetrics())
	if _, err := none.Authenticate(signed); !errors.Is(err, auth.ErrNoKey) {
		t.Errorf("no key file: %v", err)
	}
}

func TestBearer(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc":    "abc",
		"bearer abc":    "abc",
		"BEARER  abc ":  "abc",
		"Basic abc":     "",
		"Bearer":        "",
		"Bearerabc":     "",
		"":              "",
		"Token abc def": "",
	} {
		if got := bearer(header); got != want {
			t.Errorf("bearer(%q) = %q, want %q", header, got, want)
		}
	}
}
