package extractive

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ellipsis ends a sentence cut to fit.
const ellipsis = "…"

// cutToFit is the summary when not even the best sentence fits the budget:
// "Speaker: " and the longest head of text that fits with "…", cut where a
// word ends (before a space, or between two CJK characters, which write
// no spaces). A text whose first word alone does not fit is cut between
// two characters: the one case where a word is cut, and only of a single
// word longer than the whole budget.
func cutToFit(speaker, text string, budget int, count Counter) string {
	p := prefix(speaker)
	if count(p+ellipsis) > budget {
		return ""
	}
	var bounds, chars []int // byte offsets where a head may end
	prev := rune(-1)
	for i, r := range text {
		if i > 0 {
			chars = append(chars, i)
			if unicode.IsSpace(r) || (isCJK(r) && isCJK(prev)) {
				bounds = append(bounds, i)
			}
		}
		prev = r
	}
	if head := longestFit(text, p, bounds, budget, count); head != "" {
		return head
	}
	return longestFit(text, p, chars, budget, count)
}

// longestFit is prefix + the longest text[:end] (end from ends, ascending)
// with "…" within budget, or "" when none fits. Binary search: the count
// only grows with the head.
func longestFit(text, p string, ends []int, budget int, count Counter) string {
	lo, hi, best := 0, len(ends)-1, ""
	for lo <= hi {
		mid := (lo + hi) / 2
		head := strings.TrimRightFunc(text[:ends[mid]], unicode.IsSpace)
		if out := p + head + ellipsis; count(out) <= budget && utf8.ValidString(out) {
			best, lo = out, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}
