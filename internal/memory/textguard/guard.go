package textguard

import (
	"regexp"
	"strings"
	"unicode"

	unorm "golang.org/x/text/unicode/norm"
)

// FlagInjection marks a memory the injection guard flagged (mode Flag).
// Flagged memories are stored and searchable but never rendered into context.
const FlagInjection = "injection"

// injectionMarkers are phrases and chat-template tokens that try to turn a
// stored memory into instructions for the model reading it later.
// Each carries needles (prefilter.go): ASCII text holding none of them
// skips the expression.
var injectionMarkers = withNeedles([]injectionMarker{
	{reason: "instruction override", re: regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override|bypass)\s+(all\s+|any\s+|every\s+)?(of\s+)?(the\s+|your\s+|my\s+)?(previous|prior|above|earlier|preceding|original|system|existing)\s+(instructions?|prompts?|messages?|rules|directions|guidelines|context)`)},
	{reason: "instruction override", re: regexp.MustCompile(`(?i)\b(ignore|disregard|forget)\s+(everything|all)\s+(you\s+were\s+told|above|before)`)},
	{reason: "role hijack", re: regexp.MustCompile(`(?i)\byou\s+are\s+now\s+(in\s+)?(an?\s+)?(unrestricted|jailbroken|developer\s+mode|dan\b|god\s+mode|evil)`)},
	{reason: "prompt exfiltration", re: regexp.MustCompile(`(?i)\b(reveal|print|show|repeat|output|leak)\s+(me\s+)?(your|the)\s+(system\s+prompt|hidden\s+instructions|initial\s+instructions|instructions\s+above)`)},
	{reason: "fake instructions", re: regexp.MustCompile(`(?i)(^|\n)\s*(new|updated|real|actual)\s+instructions\s*:`)},
	{reason: "fake system turn", re: regexp.MustCompile(`(?i)(^|\n)\s*(#+\s*)?(system|assistant)\s*(prompt|message)?\s*:\s*you\s+(are|must|will|should)`)},
	{reason: "chat template token", re: regexp.MustCompile(`(?i)<\|\s*(im_start|im_end|system|endoftext|eot_id|start_header_id)\s*\|>|\[/?INST\]|<<\s*/?SYS\s*>>|</?\s*system\s*>`)},
})

// injectionMarker is one phrase or token of the guard.
type injectionMarker struct {
	reason string
	re     *regexp.Regexp
	// needles: one of them is in every match (prefilter.go; nil: none known).
	needles []string
}

func withNeedles(ms []injectionMarker) []injectionMarker {
	for i := range ms {
		ms[i].needles = needlesOf(ms[i].re.String())
	}
	return ms
}

// isInvisible reports format and bidi control characters that hide text from
// a human reviewer while a model still reads it.
func isInvisible(r rune) bool {
	switch {
	case r == 0x200B, r == 0x200C, r == 0x200E, r == 0x200F, // zero-width space/non-joiner, LRM, RLM
		r >= 0x202A && r <= 0x202E, // bidi embeddings and overrides
		r >= 0x2060 && r <= 0x2064, // word joiner, invisible operators
		r >= 0x2066 && r <= 0x2069, // bidi isolates
		r == 0xFEFF, r == 0x00AD, r == 0x180E, r == 0x061C,
		r >= 0xE0000 && r <= 0xE007F: // tag characters ("ASCII smuggling")
		return true
	}
	// Other format characters too, except the zero-width joiner of emoji sequences.
	return unicode.Is(unicode.Cf, r) && r != 0x200D
}

// DetectInjection returns why s looks like a prompt injection, or "".
// The phrases are matched on Normalize(s, ...), so full-width or
// mathematical letters, zero-width characters inside words and the like do
// not hide them.
func DetectInjection(s string) string {
	if isASCII(s) {
		return detectASCII(s)
	}
	return detectNormalized(s)
}

// detectNormalized is DetectInjection of any text: the two normalized
// readings, every marker on each.
func detectNormalized(s string) string {
	if strings.IndexFunc(s, isInvisible) >= 0 {
		return "invisible or bidirectional Unicode control characters"
	}
	// Two readings: format characters deleted (they may split a word,
	// "ig\u200bnore") and format characters as spaces (they may stand for
	// the spaces between words, "ignore\u200dall\u200dprevious").
	for _, folded := range []string{Normalize(s, false), Normalize(s, true)} {
		for _, m := range injectionMarkers {
			if m.re.MatchString(folded) {
				return m.reason
			}
		}
	}
	return ""
}

// detectASCII is DetectInjection of ASCII text (issue 32: the guard was
// a quarter of the service's CPU per conversation append). ASCII holds no
// invisible or format character, and Normalize leaves it as it is (NFKD
// and NFKC keep ASCII, and no ASCII rune is mapped), so both readings are
// s itself: the markers run once, each only when one of its needles is
// in the text (TestDetectInjectionASCIIIsExact).
func detectASCII(s string) string {
	lower := strings.ToLower(s)
	for _, m := range injectionMarkers {
		if mayMatch(m.needles, lower, true) && m.re.MatchString(s) {
			return m.reason
		}
	}
	return ""
}

// LooksLikeInjection reports whether the injection guard would flag text
// (whatever the policy's mode): for texts that carry no flag of their own,
// such as the old contents in a memory's history.
func LooksLikeInjection(text string) bool { return DetectInjection(text) != "" }

// isBlankLetter reports letters that render as nothing and can stand in
// for a space: the Hangul fillers and the braille blank (they are neither
// format characters nor spaces to Unicode).
func isBlankLetter(r rune) bool {
	return r == 0x115F || r == 0x1160 || r == 0x3164 || r == 0xFFA0 || r == 0x2800
}

// Normalize folds the ways of writing a phrase that a model reads
// as the phrase itself, for matching only (it is never stored): format
// characters (Unicode Cf: zero-width space and joiners, BOM, bidi controls,
// tag characters) are removed; compatibility forms are folded (NFKC:
// full-width, mathematical and circled letters, ligatures become plain
// letters); combining marks are dropped ("ïgnore" is "ignore"); non-ASCII
// spaces become a space, line and paragraph separators a newline.
// Look-alike letters of other scripts (Cyrillic "і") are not folded.
func Normalize(s string, formatAsSpace bool) string {
	// Invalid UTF-8 first becomes U+FFFD, as strings.Map below would make
	// it: left in, a stray byte stops NFKD from decomposing the letter
	// after it ("\xf3à" kept its accent), so normalizing twice differed
	// from once. (Stored text is valid UTF-8 already; this is for any caller.)
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = unorm.NFKD.String(s)
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.Is(unicode.Cf, r) && formatAsSpace, isBlankLetter(r):
			return ' '
		case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Mn, r):
			return -1
		case r == 0x85, r == 0x2028, r == 0x2029:
			return '\n'
		case r > 0x7f && unicode.IsSpace(r):
			return ' '
		}
		return r
	}, s)
	return unorm.NFKC.String(s)
}

// SanitizeForPrompt makes stored text safe to splice into a prompt line:
// invisible characters and control characters removed, all whitespace
// (newlines included) collapsed, so a memory cannot fake a new section.
func SanitizeForPrompt(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case isInvisible(r) || (r < 0x20 && !unicode.IsSpace(r)) || r == 0x7f:
			continue
		case unicode.IsSpace(r):
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}
