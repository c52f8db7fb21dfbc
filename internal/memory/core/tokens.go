package core

import (
	"unicode"
	"unicode/utf8"
)

// ASCIIBytesPerToken is the ratio of CountTokens for ASCII text.
const ASCIIBytesPerToken = 4

// CountTokens estimates how many tokens a common LLM tokenizer makes of s.
// It is the one counter of Engram (memory.CountTokens is this one): windows, compaction thresholds, summary
// sizes and context rendering all use it, so a budget means the same
// everywhere.
//
// The estimate: a CJK character — a rune of the Han, Hiragana, Katakana or
// Hangul scripts — is 1/1.5 token (tokenizers give these scripts roughly
// 1.5 characters a token); everything else is 1/4 token per UTF-8 byte
// (about 4 characters of English a token; other scripts and emoji, being
// several bytes a character, count more per character, as tokenizers do).
// The sum is rounded up: "" is 0 tokens, any other text at least 1.
func CountTokens(s string) int {
	var bytes, cjk int
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			bytes++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if isCJK(r) {
			cjk++
		} else {
			bytes += size
		}
		i += size
	}
	// bytes/4 + cjk/1.5 = (3*bytes + 8*cjk) / 12, rounded up.
	return (3*bytes + 8*cjk + 11) / 12
}

// isCJK reports whether r belongs to the scripts CountTokens counts as CJK.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}
