package core

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/engram-dev/engram/internal/memory/textguard"
)

// TestArbiterTextIsCutOnARuneStart (issue 26, twenty-second review, NEW 1
// and LOW 1): the text an arbiter prompt quotes is at most
// MaxArbiterTextBytes, valid UTF-8, the start of the redacted and
// neutralized text, never longer than that text; a short text is whole.
func TestArbiterTextIsCutOnARuneStart(t *testing.T) {
	red, err := textguard.NewRedactor(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"64 KiB of <":             strings.Repeat("<", 64<<10),
		"runes of three bytes":    strings.Repeat("€", 1000), // 2,048 falls inside a rune
		"runes of four bytes":     "x" + strings.Repeat("𝄞", 1000),
		"runes of one and two":    strings.Repeat("<é", 32<<10),
		"exactly the bound":       strings.Repeat("a", MaxArbiterTextBytes),
		"a short sentence":        "The user drinks green tea & <b>coffee</b>.",
		"a heading to neutralize": "## constraints " + strings.Repeat("word ", 1000),
	} {
		whole := textguard.PromptText(red.Redacted(text))
		got := ArbiterText(red, text)
		switch {
		case len(got) > MaxArbiterTextBytes:
			t.Errorf("%s: %d bytes, want at most %d", name, len(got), MaxArbiterTextBytes)
		case !utf8.ValidString(got):
			t.Errorf("%s: cut inside a rune", name)
		case !strings.HasPrefix(whole, got):
			t.Errorf("%s: not the start of the prompt text", name)
		case len(whole) <= MaxArbiterTextBytes && got != whole:
			t.Errorf("%s: a text within the bound was changed: %q", name, got)
		case len(whole) > MaxArbiterTextBytes && len(got) < MaxArbiterTextBytes-utf8.UTFMax:
			t.Errorf("%s: cut to %d bytes, more than a rune short of the bound", name, len(got))
		}
	}
}

// TestArbiterTextRedactsBeforeItCuts: a secret that the cut would split is
// redacted whole, not left as a start its pattern no longer matches.
func TestArbiterTextRedactsBeforeItCuts(t *testing.T) {
	red, err := textguard.NewRedactor(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := "sk-" + strings.Repeat("Q7", 20)
	text := strings.Repeat("a ", (MaxArbiterTextBytes-10)/2) + key + " and more"
	got := ArbiterText(red, text)
	if strings.Contains(got, "sk-") || strings.Contains(got, "Q7Q7") {
		t.Fatalf("the start of a key left the redaction: %q", got[len(got)-40:])
	}
}
