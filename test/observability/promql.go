package observability

import (
	"regexp"
	"strings"
)

// The metric names of a PromQL expression, found without the PromQL parser
// of github.com/prometheus/prometheus (a module that would pull most of
// Prometheus into go.mod for one test). The expressions here use a small
// part of PromQL: selectors, rate/histogram_quantile/label_replace/time,
// aggregations with by/without, arithmetic and comparison, and/or. The
// extractor removes what is not a metric name — strings, label matchers,
// range and subquery brackets, grouping label lists, function and
// aggregation calls, keywords, numbers — and returns what is left.
var (
	reString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	reMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	reRange    = regexp.MustCompile(`\[[^\[\]]*\]`)
	reGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	reCall     = regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*\s*\(`)
	reIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	reNumber   = regexp.MustCompile(`\b\d+(\.\d+)?(e[+-]?\d+)?\b`)
)

// keywords are the PromQL words that are not metric names.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true}

// MetricNames returns the metric names expr selects, in order, without repeats.
func MetricNames(expr string) []string {
	s := reString.ReplaceAllString(expr, " ")
	s = reMatchers.ReplaceAllString(s, " ")
	s = reRange.ReplaceAllString(s, " ")
	s = reGrouping.ReplaceAllString(s, " ")
	s = reCall.ReplaceAllString(s, " ")
	s = reNumber.ReplaceAllString(s, " ")
	var out []string
	seen := map[string]bool{}
	for _, id := range reIdent.FindAllString(s, -1) {
		if keywords[id] || seen[id] || strings.HasPrefix(id, "$") {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	return out
}

// balanced reports whether the brackets of expr (outside strings) pair up,
// a cheap syntax check of what the extractor cannot see.
func balanced(expr string) bool {
	s := reString.ReplaceAllString(expr, `""`)
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for _, r := range s {
		switch r {
		case '(', '[', '{':
			stack = append(stack, r)
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && strings.Count(s, `"`)%2 == 0
}
