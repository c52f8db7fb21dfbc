package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func TestTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	content := "# comment\n\n  alpha  \nbeta\r\n#gamma\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tk := NewTokens(path, slog.New(slog.DiscardHandler), NewMetrics())
	for tok, want := range map[string]bool{
		"alpha": true, "beta": true, "gamma": false, "#gamma": false, "": false,
		"alph": false, "alphaa": false, " alpha": false, "comment": false,
	} {
		if got := tk.Valid(tok); got != want {
			t.Errorf("Valid(%q) = %v, want %v", tok, got, want)
		}
	}
	if tk.Count() != 2 {
		t.Errorf("Count = %d, want 2", tk.Count())
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
