package textguard

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzNormalizeForGuard: normalizing twice equals normalizing once, in
// both readings of format characters (else an attacker could nest
// encodings the guard unwraps one layer of), and the result holds no
// format character and no combining mark.
func FuzzNormalizeForGuard(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		for _, formatAsSpace := range []bool{false, true} {
			once := Normalize(s, formatAsSpace)
			if twice := Normalize(once, formatAsSpace); twice != once {
				t.Fatalf("Normalize(formatAsSpace=%v) is not idempotent:\nin    %q\nonce  %q\ntwice %q", formatAsSpace, s, once, twice)
			}
			for _, r := range once {
				if unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Mn, r) {
					t.Fatalf("Normalize(%q, %v) = %q keeps %U", s, formatAsSpace, once, r)
				}
			}
		}
	})
}

// fullWidth writes the printable ASCII of s in full-width forms (ＩＧＮＯＲＥ),
// which read the same to a model.
func fullWidth(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == ' ':
			return '\u3000'
		case r > ' ' && r < 0x7f:
			return r - 0x21 + 0xFF01
		}
		return r
	}, s)
}

// interleave puts sep after every character of s.
func interleave(s, sep string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
		b.WriteString(sep)
	}
	return b.String()
}

// FuzzDetectInjection: whatever the guard catches, it still catches when
// the text is disguised the ways a model reads through: full-width
// letters, upper case, zero-width characters or combining marks between
// the letters. Never a panic on any input.
func FuzzDetectInjection(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		reason := DetectInjection(s)
		if reason == "" || !utf8.ValidString(s) {
			return
		}
		for name, disguised := range map[string]string{
			"full-width":     fullWidth(s),
			"upper case":     strings.Map(asciiUpper, s),
			"zero-width":     interleave(s, "\u200b"),
			"soft hyphens":   interleave(s, "\u00ad"),
			"combining mark": interleave(s, "\u0301"),
		} {
			if DetectInjection(disguised) == "" {
				t.Fatalf("%q is caught (%s), but not in %s: %q", s, reason, name, disguised)
			}
		}
	})
}

func asciiUpper(r rune) rune {
	if r >= 'a' && r <= 'z' {
		return r - 'a' + 'A'
	}
	return r
}

// FuzzSanitizeForPrompt: text spliced into a prompt line is one line of
// visible characters: no control, format or invisible character, no line
// break (a memory cannot open a new prompt section), no doubled or edge
// space; sanitizing it again changes nothing.
func FuzzSanitizeForPrompt(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		out := SanitizeForPrompt(s)
		if again := SanitizeForPrompt(out); again != out {
			t.Fatalf("SanitizeForPrompt not idempotent: %q -> %q -> %q", s, out, again)
		}
		if strings.HasPrefix(out, " ") || strings.HasSuffix(out, " ") || strings.Contains(out, "  ") {
			t.Fatalf("SanitizeForPrompt(%q) = %q: edge or doubled space", s, out)
		}
		for _, r := range out {
			if r == utf8.RuneError && !strings.ContainsRune(s, utf8.RuneError) && utf8.ValidString(s) {
				t.Fatalf("SanitizeForPrompt(%q) invented U+FFFD", s)
			}
			if isInvisible(r) || r < 0x20 || r == 0x7f || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("SanitizeForPrompt(%q) = %q keeps %U", s, out, r)
			}
		}
		if strings.IndexFunc(out, isInvisible) >= 0 {
			t.Fatalf("invisible characters survive in %q", out)
		}
	})
}
