package extractive

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// abbreviations end with a period that does not end a sentence ("Dr.
// Silva", "e.g. Porto"); lower case, without their final period.
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "st": true, "sr": true, "jr": true,
	"mt": true, "vs": true, "etc": true, "e.g": true, "i.e": true, "cf": true, "al": true, "approx": true,
	"no": true, "nr": true, "inc": true, "ltd": true, "co": true, "corp": true, "dept": true, "fig": true,
	"jan": true, "feb": true, "mar": true, "apr": true, "jun": true, "jul": true, "aug": true,
	"sep": true, "sept": true, "oct": true, "nov": true, "dec": true, "p.m": true, "a.m": true, "u.s": true,
}

// splitSentences cuts text into its sentences, each an exact substring of
// text with the spaces around it trimmed. A sentence ends at a newline, at
// "。！？" (scripts that write no space after them), and at ". ! ? …" (and
// the Devanagari danda, the Arabic question mark, the Urdu full stop),
// with closing quotes or brackets, followed by a space and not after an
// abbreviation or an initial ("J. Silva"), nor before a lower-case word.
func splitSentences(text string) []string {
	var out []string
	start := 0
	emit := func(end int) {
		if s := strings.TrimSpace(text[start:end]); s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		next := i + size
		switch {
		case r == '\n':
			emit(next)
		case r == '。' || r == '！' || r == '？':
			emit(closers(text, next))
		case r == '.' || r == '!' || r == '?' || r == '…' || r == '।' || r == '؟' || r == '۔':
			end := closers(text, next)
			if endsSentence(text, start, i, end, r) {
				emit(end)
				next = end
			}
		}
		i = next
	}
	emit(len(text))
	return out
}

// closers is the index after the closing quotes and brackets at text[i:].
func closers(text string, i int) int {
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !strings.ContainsRune(`"')]}»”’」』`, r) {
			break
		}
		i += size
	}
	return i
}

// endsSentence reports whether the mark r at text[i] (with its closers up
// to end) ends the sentence that began at start.
func endsSentence(text string, start, i, end int, r rune) bool {
	if end == len(text) {
		return true
	}
	after, _ := utf8.DecodeRuneInString(text[end:])
	if !unicode.IsSpace(after) {
		return false // "3.5", "example.com", "?!"
	}
	word := nextWord(text[end:])
	if first, _ := utf8.DecodeRuneInString(word); unicode.IsLower(first) {
		return false // "e.g. the train", "wait... what"
	}
	if r != '.' || end != i+1 {
		return true
	}
	prev := lastWord(text[start:i])
	if abbreviations[strings.ToLower(prev)] {
		return false
	}
	// An initial: one letter, upper case ("J. Silva").
	if n := utf8.RuneCountInString(prev); n == 1 {
		p, _ := utf8.DecodeRuneInString(prev)
		return !unicode.IsUpper(p)
	}
	return true
}

// nextWord is the first word of s after its leading spaces.
func nextWord(s string) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		return s[:i]
	}
	return s
}

// lastWord is the trailing run of letters and inner periods of s ("e.g",
// "Dr"), without opening brackets or quotes.
func lastWord(s string) string {
	i := len(s)
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsLetter(r) && r != '.' {
			break
		}
		i -= size
	}
	return strings.TrimLeft(s[i:], ".")
}
