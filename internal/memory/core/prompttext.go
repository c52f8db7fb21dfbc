package core

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// NewestWithin joins lines, keeping the newest that fit within
// maxChars characters (the oldest kept line may lose its beginning); it reports
// whether anything was left out.
func NewestWithin(lines []string, maxChars int) (string, bool) {
	var kept []string
	left := maxChars
	truncated := false
	for i := len(lines) - 1; i >= 0; i-- {
		n := utf8.RuneCountInString(lines[i]) + 1
		if n <= left {
			kept = append(kept, lines[i])
			left -= n
			continue
		}
		truncated = true
		if left > 4 {
			r := []rune(lines[i])
			kept = append(kept, "..."+string(r[len(r)-(left-4):]))
		}
		break
	}
	slices.Reverse(kept)
	return strings.Join(kept, "\n"), truncated
}
