package textguard

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestInjectionNeedles: every marker has needles, or ASCII text would
// still run its expression (the prefilter would save nothing for it).
func TestInjectionNeedles(t *testing.T) {
	for _, m := range injectionMarkers {
		t.Logf("%-20s %q", m.reason, m.needles)
		if m.needles == nil {
			t.Errorf("%s %s: no needles", m.reason, m.re)
		}
	}
}

// TestNormalizeKeepsASCII: what detectASCII rests on: every ASCII byte
// is its own normalized reading, and so is ASCII text.
func TestNormalizeKeepsASCII(t *testing.T) {
	var b strings.Builder
	for c := range 0x80 {
		b.WriteByte(byte(c))
		s := string(rune(c))
		if Normalize(s, false) != s || Normalize(s, true) != s || strings.IndexFunc(s, isInvisible) >= 0 {
			t.Errorf("%q: normalized %q / %q", s, Normalize(s, false), Normalize(s, true))
		}
	}
	if s := b.String(); Normalize(s, false) != s || Normalize(s, true) != s {
		t.Errorf("every ASCII byte in a row is not kept")
	}
}

// injectionPieces build texts near and at the markers' matches: their
// words in both cases, separators, line starts, the template tokens.
var injectionPieces = []string{"ignore", "IGNORE", "Disregard", "forget", "override", "bypass", "all", "any", "every", "of", "the", "your", "my",
	"previous", "PRIOR", "above", "earlier", "system", "System", "instructions", "instruction", "prompt", "messages", "rules", "context",
	"everything", "you were told", "before", "you", "You", "are", "now", "in", "an", "a", "unrestricted", "developer", "mode", "dan", "DAN", "god",
	"evil", "reveal", "print", "show", "me", "hidden", "initial", "new", "New", "updated", "real", "actual", ":", "#", "##", "assistant",
	"message", "must", "will", "should", "<|", "|>", "im_start", "endoftext", "[INST]", "[/INST]", "<<", "SYS", ">>", "<", ">", "/",
	" ", "  ", "\n", "\t", "\r", ".", "x", "dance", "sys", "inst]"}

// TestDetectInjectionASCIIIsExact: on ASCII text the fast path (one
// reading, needles first) answers what both normalized readings with
// every marker answer.
func TestDetectInjectionASCIIIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 7))
	found := 0
	for i := range 30000 {
		var b strings.Builder
		for range 1 + r.IntN(14) {
			b.WriteString(injectionPieces[r.IntN(len(injectionPieces))])
			if r.IntN(3) > 0 {
				b.WriteByte(" \n"[r.IntN(2)])
			}
		}
		s := b.String()
		got, want := detectASCII(s), detectNormalized(s)
		if got != want {
			t.Fatalf("case %d %q: fast path %q, normalized %q", i, s, got, want)
		}
		if want != "" {
			found++
		}
	}
	if found < 1000 {
		t.Errorf("only %d of 30000 random texts were flagged: the test does not reach the markers", found)
	}
	t.Logf("%d of 30000 flagged", found)
}
