package textguard

import (
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// A pattern's needles are strings of which every match of the pattern
// contains at least one (ASCII, lower case): text that holds none of them
// cannot match, and Redact skips the pattern's regular expression, which
// costs microseconds per pattern even on a short text (issue 32: the
// query's redaction was ~5 % of the service's CPU per search). The needles
// are derived from the parsed expression (a sound analysis: any construct
// it does not know gives no needles, and then the pattern always runs);
// TestPrefilterIsExact checks Redact with and without them.

// maxNeedles bounds the sets the analysis builds (cross products grow fast).
const maxNeedles = 32

// minNeedleLen is the shortest needle worth a prefilter: a letter or two is
// in almost every text.
const minNeedleLen = 3

// needlesOf returns the needles of a pattern, or nil (always run it).
func needlesOf(expr string) []string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	set, ok := required(re)
	if !ok || shortest(set) < minNeedleLen {
		return nil
	}
	return set
}

// exact returns every string re matches, when they are few and all ASCII
// (lower case; zero-width assertions match "").
func exact(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if !isASCII(s) {
			return nil, false
		}
		return []string{strings.ToLower(s)}, true
	case syntax.OpCharClass:
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i+1] >= utf8.RuneSelf || re.Rune[i+1]-re.Rune[i] >= maxNeedles {
				return nil, false
			}
			for c := re.Rune[i]; c <= re.Rune[i+1]; c++ {
				set = addNeedle(set, strings.ToLower(string(c)))
			}
		}
		return set, len(set) > 0 && len(set) <= maxNeedles
	case syntax.OpEmptyMatch, syntax.OpWordBoundary, syntax.OpNoWordBoundary,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return []string{""}, true
	case syntax.OpCapture:
		return exact(re.Sub[0])
	case syntax.OpAlternate:
		return union(re.Sub, exact)
	case syntax.OpConcat:
		set := []string{""}
		for _, sub := range re.Sub {
			s, ok := exact(sub)
			if !ok {
				return nil, false
			}
			if set = cross(set, s); set == nil {
				return nil, false
			}
		}
		return set, true
	}
	return nil, false
}

// union is the needles of an alternation: those of every branch, each
// found by f; none when a branch has none.
func union(branches []*syntax.Regexp, f func(*syntax.Regexp) ([]string, bool)) ([]string, bool) {
	var set []string
	for _, b := range branches {
		s, ok := f(b)
		if !ok {
			return nil, false
		}
		for _, n := range s {
			set = addNeedle(set, n)
		}
	}
	return set, len(set) <= maxNeedles
}

// required returns needles of re: strings one of which every match
// contains.
func required(re *syntax.Regexp) ([]string, bool) {
	if set, ok := exact(re); ok && shortest(set) > 0 {
		return set, true
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpAlternate:
		return union(re.Sub, required)
	case syntax.OpConcat:
		return requiredConcat(re.Sub)
	}
	return nil, false
}

// requiredConcat picks the best needles of a concatenation: those of one
// part, or the cross product of a run of consecutive exact parts.
func requiredConcat(subs []*syntax.Regexp) ([]string, bool) {
	var best []string
	consider := func(set []string) {
		if len(set) > 0 && shortest(set) > shortest(best) {
			best = set
		}
	}
	run := []string{""}
	for _, sub := range subs {
		if s, ok := exact(sub); ok {
			if next := cross(run, s); next != nil {
				run = next
				consider(run)
				continue
			}
			run = s
			consider(run)
			continue
		}
		run = []string{""}
		if s, ok := required(sub); ok {
			consider(s)
		}
	}
	return best, best != nil
}

// cross is every a+b, or nil when there would be more than maxNeedles.
func cross(as, bs []string) []string {
	if len(as)*len(bs) > maxNeedles {
		return nil
	}
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			out = addNeedle(out, a+b)
		}
	}
	return out
}

func addNeedle(set []string, n string) []string {
	for _, have := range set {
		if have == n {
			return set
		}
	}
	return append(set, n)
}

// shortest is the length of the shortest needle (0 for none).
func shortest(set []string) int {
	if len(set) == 0 {
		return 0
	}
	m := len(set[0])
	for _, n := range set[1:] {
		m = min(m, len(n))
	}
	return m
}

// mayMatch reports whether a pattern with needles may match text whose
// lower-case form is lower. Text that is not all ASCII (ascii false) may
// match any pattern: case folding reaches beyond ASCII (the Kelvin sign
// matches (?i)k), so every pattern runs on it.
func mayMatch(needles []string, lower string, ascii bool) bool {
	if needles == nil || !ascii {
		return true
	}
	for _, n := range needles {
		if strings.Contains(lower, n) {
			return true
		}
	}
	return false
}
