package extractive

import (
	"strings"
	"unicode"
)

// stopwords carry no topic: they are left out of the TF-IDF vectors, so
// two sentences are not alike for sharing "the" and "is".
var stopwords = toSet(`a an and are as at be been but by can could did do does for from had has have he her here him his how i if
in into is it its me my no not of on or our she so than that the their them then there these they this to too us was we were
what when where which who why will with would you your yes ok okay please thanks thank just also very`)

func toSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// months make a sentence dated even without digits ("on 3 March", "in
// June"); lower case.
var months = toSet(`january february march april june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec`)

// features is what scoring needs of one sentence: its terms (lower case
// words, numbers, and overlapping pairs of CJK characters, which have no
// spaces to split words at), and whether it names something or holds a
// number or a date.
type features struct {
	terms   []string
	named   bool
	numeric bool
}

// sentenceFeatures reads the features of s.
func sentenceFeatures(s string) features {
	var f features
	first := true
	for _, w := range words(s) {
		lower := strings.ToLower(w)
		r := []rune(w)
		switch {
		case isCJK(r[0]):
			f.terms = append(f.terms, cjkPairs(r)...)
			continue
		case unicode.IsDigit(r[0]) || months[lower] && !first:
			f.numeric = true
		case unicode.IsUpper(r[0]) && !first && lower != "i":
			// A capitalized word inside a sentence: a name ("Lisbon",
			// "Ana"), which the summary should keep.
			f.named = true
		}
		first = false
		if !stopwords[lower] {
			f.terms = append(f.terms, lower)
		}
	}
	return f
}

// words are the runs of letters and digits of s; a CJK run is one word.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r):
			flush()
		case len(cur) > 0 && isCJK(r) != isCJK(cur[0]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

// cjkPairs are the overlapping pairs of a CJK run ("东京都" gives "东京",
// "京都"); a single character is its own term.
func cjkPairs(r []rune) []string {
	if len(r) == 1 {
		return []string{string(r)}
	}
	out := make([]string, 0, len(r)-1)
	for i := 0; i+1 < len(r); i++ {
		out = append(out, string(r[i:i+2]))
	}
	return out
}

// isCJK reports whether r is of a script written without spaces between
// words (Han, Hiragana, Katakana; Hangul uses spaces).
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}
