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
	for _, p := range splitPieces(text) {
		out = append(out, p.text)
	}
	return out
}

// piece is a sentence and whether it follows the one before it with
// nothing in between ("我住在东京。我喜欢猫。"), so the summary joins them
// so again.
type piece struct {
	text  string
	glued bool
}

// splitPieces is splitSentences with the glue between the sentences.
func splitPieces(text string) []piece {
	var out []piece
	start := 0
	tight := false // the text before start ends a sentence with no space after it
	emit := func(end int) {
		raw := text[start:end]
		if s := strings.TrimSpace(raw); s != "" {
			first, _ := utf8.DecodeRuneInString(raw)
			out = append(out, piece{text: s, glued: tight && !unicode.IsSpace(first)})
		}
		last, _ := utf8.DecodeLastRuneInString(raw)
		tight = raw != "" && !unicode.IsSpace(last)
		start = end
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		next := i + size
		switch r {
		case '\n':
			emit(next)
		case '。', '！', '？':
			emit(closers(text, next))
		case '.', '!', '?', '…', '।', '؟', '۔':
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
