package textguard

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	unorm "golang.org/x/text/unicode/norm"
)

// Stored text reaches prompts inside sections Engram lays out itself
// ("## constraints", "- <memory>", "USER: <message>"). Whoever wrote the
// text — an agent above all — must not be able to add structure of its
// own that a model would read as Engram's: a heading ("## constraints"
// in a profile would make the lines after it look like the user's rules),
// a speaker label ("SYSTEM:"), a code fence that swallows the sections
// after it, or an XML-like tag ("</constraints>", "<system>"). PromptText
// is the one function every renderer uses for such text.

// PromptText makes stored text safe to splice into one line of a prompt:
// SanitizeForPrompt (one line, no control or invisible characters), then
// NeutralizeStructure.
func PromptText(s string) string {
	return NeutralizeStructure(SanitizeForPrompt(s))
}

// structureRules find structure in the folded copy of one line (foldLine);
// each match is rewritten by the rule's replace, which gets the matched
// folded text.
var structureRules = []struct {
	name    string
	re      *regexp.Regexp
	replace func(folded string) string
}{
	// A heading: '#' marks at the start of the line, also after list or
	// quote markers ("- ## constraints" is a heading inside a list item).
	// The marks go; the words stay.
	{"heading", regexp.MustCompile(`^(?:\s*(?:[-*+>]|\d{1,9}[.)])\s+)*\s*((?:#+\s*)+)`), nil},
	// A line of rule characters only: a thematic break, or a setext
	// underline that makes the line before it a heading ("constraints"
	// over "===").
	{"rule", regexp.MustCompile(`^[\s=\-*_~]*[=\-*_~][\s=\-*_~]*$`), func(string) string { return "" }},
	// A code fence: three or more backticks or tildes.
	{"fence", regexp.MustCompile("`{3,}|~{3,}"), func(f string) string { return strings.Repeat("'", utf8.RuneCountInString(f)) }},
	// A speaker label, in every form the guard's normalization folds to
	// "<role>:" (full-width or small colons, full-width or mathematical
	// letters): "user (quoted) -".
	{"role", regexp.MustCompile(`(?i)\b(user|assistant|system|tool|human|ai|developer)\s*:`), func(f string) string {
		return strings.ToLower(strings.TrimRightFunc(strings.TrimSuffix(f, ":"), unicode.IsSpace)) + " (quoted) -"
	}},
	// An XML-like tag or a chat-template token: the brackets become
	// entities ("&lt;system&gt;"), the name stays readable.
	{"tag", regexp.MustCompile(`<\s*/?\s*[A-Za-z_!?|][^<>]*>`), nil},
}

// NeutralizeStructure rewrites the structure in one line of text (see
// structureRules). Matching runs on a folded copy (foldLine: the guard's
// normalization, rune by rune), so every way of writing a marker that a
// model reads as the marker is found; only the characters of a marker are
// rewritten, the rest of the text stays as it was written. It repeats
// until nothing matches (removing a heading mark may leave a rule line),
// so the result is a fixed point: neutralizing it again changes nothing.
func NeutralizeStructure(s string) string {
	for range 8 {
		out, changed := neutralizeOnce(s)
		if !changed {
			return out
		}
		s = out
	}
	return s
}

// edit replaces the bytes [from, to) of the original line.
type edit struct {
	from, to int
	text     string
}

// structureBytes are the characters every structure rule needs one of (in
// the folded text): a line without any is left alone at once, which is
// most lines.
const structureBytes = "#=-*_~`:<"

// neutralizeOnce folds s once, applies every rule's matches that do not
// overlap an earlier one (in order of position; the rest wait for the next
// pass) and reports whether anything changed.
func neutralizeOnce(s string) (string, bool) {
	f := foldLine(s)
	if !strings.ContainsAny(f.text, structureBytes) {
		return s, false
	}
	var edits []edit
	for _, rule := range structureRules {
		for _, m := range rule.re.FindAllStringSubmatchIndex(f.text, -1) {
			edits = append(edits, ruleEdits(rule.name, rule.replace, f, m)...)
		}
	}
	if len(edits) == 0 {
		return s, false
	}
	slices.SortStableFunc(edits, func(a, b edit) int { return a.from - b.from })
	return applyEdits(s, edits), true
}

// ruleEdits turns one match (submatch indexes m into the folded text) into
// edits of the original line.
func ruleEdits(name string, replace func(string) string, f folded, m []int) []edit {
	switch name {
	case "heading":
		from, to := f.span(m[2], m[3])
		return []edit{{from, to, ""}}
	case "tag":
		// Only the two brackets are rewritten, whatever form they had.
		lf, lt := f.span(m[0], m[0]+1)
		rf, rt := f.span(m[1]-1, m[1])
		return []edit{{lf, lt, "&lt;"}, {rf, rt, "&gt;"}}
	}
	from, to := f.span(m[0], m[1])
	return []edit{{from, to, replace(f.text[m[0]:m[1]])}}
}

// applyEdits applies edits sorted by position; an edit overlapping an
// earlier one is left for the next pass.
func applyEdits(s string, edits []edit) string {
	var b strings.Builder
	pos := 0
	for _, e := range edits {
		if e.from < pos {
			continue
		}
		b.WriteString(s[pos:e.from])
		b.WriteString(e.text)
		pos = e.to
	}
	b.WriteString(s[pos:])
	return b.String()
}

// folded is a line folded rune by rune, with where each folded byte came from.
type folded struct {
	text string
	// from[i], to[i]: the bytes of the original rune folded byte i came
	// from; both nil when the line is ASCII (folded byte i is byte i).
	from, to []int
}

// span is the original bytes covering folded bytes [a, b) (b > a): from the
// start of the rune of a to the end of the rune of b-1.
func (f folded) span(a, b int) (int, int) {
	if f.from == nil {
		return a, b
	}
	return f.from[a], f.to[b-1]
}

// foldLine folds each rune of s as the injection guard does
// (Normalize: compatibility forms, combining marks and format
// characters folded or dropped), keeping the origin of every byte. Rune by
// rune rather than the whole string, so every match maps back to whole
// original runes. ASCII is its own fold.
func foldLine(s string) folded {
	if isASCII(s) {
		return folded{text: s}
	}
	f := folded{from: make([]int, 0, len(s)), to: make([]int, 0, len(s))}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n := b.Len()
		if r < utf8.RuneSelf || foldsToItself(r) {
			b.WriteRune(r)
		} else {
			b.WriteString(Normalize(string(r), false))
		}
		for range b.Len() - n {
			f.from, f.to = append(f.from, i), append(f.to, i+size)
		}
		i += size
	}
	f.text = b.String()
	return f
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldsToItself reports runes Normalize leaves as they are (most
// letters of most scripts), without its allocations: no compatibility
// decomposition, not a combining mark, format character or space.
func foldsToItself(r rune) bool {
	if r == utf8.RuneError || isBlankLetter(r) || unicode.IsSpace(r) || unicode.In(r, unicode.Mn, unicode.Cf) {
		return false
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	return unorm.NFKD.Properties(buf[:n]).Decomposition() == nil
}

// Structure names the first structure rule that still matches s, "" when
// none: how tests check that a renderer's output holds no structure of the
// stored text's own.
func Structure(s string) string {
	f := foldLine(s)
	for _, r := range structureRules {
		if r.re.MatchString(f.text) {
			return r.name
		}
	}
	return ""
}
