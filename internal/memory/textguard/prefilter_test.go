package textguard

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPrefilterNeedles: the analysis finds needles for the built-in
// patterns that cost the most on ordinary text (else the prefilter saves
// nothing) and none for a pattern without a required literal.
func TestPrefilterNeedles(t *testing.T) {
	with := 0
	for _, p := range builtinSecrets {
		n := needlesOf(p.re.String())
		t.Logf("%-20s %q", p.kind, n)
		if n != nil {
			with++
		}
	}
	if with < len(builtinSecrets)-2 {
		t.Errorf("needles for %d of %d built-in patterns", with, len(builtinSecrets))
	}
	for _, expr := range []string{`[a-z]+`, `a*b?`, `(?i)x|yz`, `.{3}`, `\d{4}`} {
		if n := needlesOf(expr); n != nil {
			t.Errorf("%s: needles %q, want none", expr, n)
		}
	}
	for expr, want := range map[string]string{`\bglpat-[A-Z]{2}`: "glpat-", `(?i)(bearer\s+)x`: "bearer", `a(?:bcd|bce)`: "abcd abce"} {
		if got := strings.Join(needlesOf(expr), " "); got != want {
			t.Errorf("%s: needles %q, want %q", expr, got, want)
		}
	}
}

// secretPieces build texts near and at the patterns' matches: keywords in
// both cases, separators, token bodies, non-ASCII letters that fold to
// ASCII ones (Kelvin sign, long s) and the markers themselves.
var secretPieces = []string{"password", "PassWord", "pa\u017f\u017fword", "passphrase", "pwd", "secret", "token", "api_key", "apikey", "client-secret",
	"AKIA", "ASIA", "ghp_", "github_pat_", "glpat-", "sk-ant-", "sk-", "sk-proj-", "xoxb-", "https://hooks.slack.com/services/", "eyJ", ".",
	"bearer ", "Bearer ", "basic ", "dXNlcjpwYXNz", "engram_", "egm1.", "://", "user:", "@", "aws_secret_access_key", "=", ": ", "\"", "'", " ",
	"\n", "ABCDEFGHIJKLMNOP", "abcdefghij0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
	"is ", "was ", "\u212a", "x", "é", "[REDACTED:jwt]"}

// TestPrefilterIsExact: Redact with the needles gives what it gives
// without them (every pattern run), on random texts made of the pieces
// the patterns look for, and on custom patterns.
func TestPrefilterIsExact(t *testing.T) {
	with, err := NewRedactor(true, []string{`(?i)internal-[0-9]{4}`, `\QA.B`, `k`})
	if err != nil {
		t.Fatal(err)
	}
	without := &Redactor{patterns: append([]secretPattern(nil), with.patterns...)}
	for i := range without.patterns {
		without.patterns[i].needles = nil
	}
	r := rand.New(rand.NewPCG(32, 3))
	pieces := append(secretPieces, "internal-", "INTERNAL-", "1234", "A.B", "K")
	for i := range 20000 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		got, gotKinds := with.Redact(s)
		want, wantKinds := without.Redact(s)
		if got != want || strings.Join(gotKinds, ",") != strings.Join(wantKinds, ",") {
			t.Fatalf("case %d %q:\n with needles %q %v\n without      %q %v", i, s, got, gotKinds, want, wantKinds)
		}
	}
}
