package textguard

// The prefilter must never skip a pattern that matches (a skipped match
// is a secret left in an answer): property tests, from the hostile review
// of the prefilter. Random regexps (case folding, classes, alternations,
// optional parts, repeats, anchors, empty groups) and strings sampled from
// each regexp's own language (so matches are common), ASCII only (non-ASCII
// text runs every pattern).

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
	"unicode"
)

var rvLits = []string{"a", "b", "k", "s", "K", "S", "ab", "key", "sk-", "abc", "ks", "pass", "tok", "-", "_", ".", ":", "x"}
var rvClasses = []string{`[a-c]`, `[ks]`, `[^a]`, `\d`, `\s`, `\w`, `[A-Z]`, `[-_]`, `.`, `[a-z]`, `[Kk]`, `[^\n]`, `[0-9A-F]`, `[a]`, `\W`, `[[:alpha:]]`, `\pL`}

func rvGen(r *rand.Rand, d int) string {
	if d <= 0 {
		if r.IntN(2) == 0 {
			return regexp.QuoteMeta(rvLits[r.IntN(len(rvLits))])
		}
		return rvClasses[r.IntN(len(rvClasses))]
	}
	switch r.IntN(14) {
	case 0, 1, 2:
		n := 2 + r.IntN(3)
		var b strings.Builder
		for range n {
			b.WriteString(rvGen(r, d-1))
		}
		return b.String()
	case 3, 4:
		n := 2 + r.IntN(2)
		parts := make([]string, n)
		for i := range parts {
			if r.IntN(8) == 0 {
				parts[i] = ""
			} else {
				parts[i] = rvGen(r, d-1)
			}
		}
		return "(?:" + strings.Join(parts, "|") + ")"
	case 5:
		return "(?:" + rvGen(r, d-1) + ")?"
	case 6:
		return "(?:" + rvGen(r, d-1) + ")*"
	case 7:
		return "(?:" + rvGen(r, d-1) + ")+"
	case 8:
		reps := []string{"{0,2}", "{1,3}", "{2}", "{0}", "{1}", "{1,}", "{0,1}"}
		return "(?:" + rvGen(r, d-1) + ")" + reps[r.IntN(len(reps))]
	case 9:
		return "(" + rvGen(r, d-1) + ")"
	case 10:
		fl := []string{"(?i:", "(?-i:", "(?s:", "(?m:", "(?U:"}
		return fl[r.IntN(len(fl))] + rvGen(r, d-1) + ")"
	case 11:
		an := []string{"^", "$", `\b`, `\B`, `\A`, `\z`, "(?:)"}
		return an[r.IntN(len(an))] + rvGen(r, d-1)
	default:
		return rvGen(r, 0)
	}
}

// rvSample writes a random string of re's language (ASCII choices only;
// false when it cannot).
func rvSample(r *rand.Rand, re *syntax.Regexp, b *strings.Builder) bool {
	switch re.Op {
	case syntax.OpLiteral:
		for _, c := range re.Rune {
			if c >= 0x80 {
				return false
			}
			if re.Flags&syntax.FoldCase != 0 && r.IntN(2) == 0 {
				if unicode.IsUpper(c) {
					c = unicode.ToLower(c)
				} else {
					c = unicode.ToUpper(c)
				}
			}
			b.WriteRune(c)
		}
		return true
	case syntax.OpCharClass:
		var ascii []rune
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for c := re.Rune[i]; c <= re.Rune[i+1] && c < 0x80; c++ {
				ascii = append(ascii, c)
			}
		}
		if len(ascii) == 0 {
			return false
		}
		b.WriteRune(ascii[r.IntN(len(ascii))])
		return true
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte(" az-_K\n"[r.IntN(7)])
		return true
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpCapture:
		return rvSample(r, re.Sub[0], b)
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !rvSample(r, s, b) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		return rvSample(r, re.Sub[r.IntN(len(re.Sub))], b)
	case syntax.OpStar, syntax.OpQuest, syntax.OpPlus, syntax.OpRepeat:
		lo, hi := 0, 3
		switch re.Op {
		case syntax.OpQuest:
			hi = 1
		case syntax.OpPlus:
			lo = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
			if hi < 0 {
				hi = lo + 2
			}
		}
		for range lo + r.IntN(hi-lo+1) {
			if !rvSample(r, re.Sub[0], b) {
				return false
			}
		}
		return true
	}
	return false
}

func TestPrefilterSoundOnRandomRegexps(t *testing.T) {
	r := rand.New(rand.NewPCG(20261127, 2)) // fixed: a failure reproduces
	noise := "abksKS-_.: \n09"
	withNeedles, checked := 0, 0
	for i := range 10000 {
		expr := rvGen(r, 1+r.IntN(4))
		if r.IntN(3) == 0 {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			continue
		}
		needles := needlesOf(re.String())
		if needles == nil {
			continue
		}
		withNeedles++
		parsed, _ := syntax.Parse(expr, syntax.Perl)
		for range 40 {
			var b strings.Builder
			for range r.IntN(3) {
				b.WriteByte(noise[r.IntN(len(noise))])
			}
			if !rvSample(r, parsed, &b) {
				break
			}
			for range r.IntN(3) {
				b.WriteByte(noise[r.IntN(len(noise))])
			}
			s := b.String()
			if !isASCII(s) || !re.MatchString(s) {
				continue
			}
			checked++
			if !mayMatch(needles, strings.ToLower(s), true) {
				t.Fatalf("case %d: %q matches %q (match %q) but needles %q skip it", i, expr, s, re.FindString(s), needles)
			}
		}
	}
	t.Logf("%d regexps with needles, %d matching texts checked", withNeedles, checked)
}

// Redact with custom patterns built to stress the analysis, with and
// without needles, on texts sampled from the patterns.
func TestRedactCustomPatternsWithAndWithoutNeedles(t *testing.T) {
	pats := []string{`(?i)k(?:ey)?[0-9]{3}`, `(?i)(?:ab|)cd[xy]{1,2}`, `s{0,3}ecret[0-9]`, `\bpa(?:ss|)\b[0-9]{4}`, `(?i)[a-j]{3}-[0-9]{2}`,
		`(?:AKIA|(?i:akib))[A-Z]{4}`, `(?m)^tok:\S+$`, `x(?:y|z){2}w`, `(?U)ab+?c{1}`}
	with, err := NewRedactor(true, pats)
	if err != nil {
		t.Fatal(err)
	}
	without := &Redactor{patterns: append([]secretPattern(nil), with.patterns...)}
	for i := range without.patterns {
		t.Logf("%q needles %q", without.patterns[i].re.String(), without.patterns[i].needles)
		without.patterns[i].needles = nil
	}
	r := rand.New(rand.NewPCG(10, 3))
	var parsed []*syntax.Regexp
	for _, p := range with.patterns {
		re, _ := syntax.Parse(p.re.String(), syntax.Perl)
		parsed = append(parsed, re)
	}
	for i := range 5000 {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			if r.IntN(4) == 0 {
				b.WriteString(secretPieces[r.IntN(len(secretPieces))])
				continue
			}
			rvSample(r, parsed[r.IntN(len(parsed))], &b)
			b.WriteByte(" =:\n"[r.IntN(4)])
		}
		s := b.String()
		got, gk := with.Redact(s)
		want, wk := without.Redact(s)
		if got != want || strings.Join(gk, ",") != strings.Join(wk, ",") {
			t.Fatalf("case %d %q:\n with %q %v\n without %q %v", i, s, got, gk, want, wk)
		}
	}
}

// End to end through Redact: random custom patterns (the policy refuses
// those matching ""), texts sampled from them and the built-ins' pieces,
// with and without needles.
func TestRedactRandomCustomPatternsWithAndWithoutNeedles(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 9))
	cases := 0
	for range 1000 {
		var pats []string
		var parsed []*syntax.Regexp
		for len(pats) < 3 {
			expr := rvGen(r, 1+r.IntN(4))
			if r.IntN(3) == 0 {
				expr = "(?i)" + expr
			}
			re, err := regexp.Compile(expr)
			if err != nil || re.MatchString("") {
				continue
			}
			pats = append(pats, expr)
			p, _ := syntax.Parse(expr, syntax.Perl)
			parsed = append(parsed, p)
		}
		with, err := NewRedactor(true, pats)
		if err != nil {
			t.Fatal(err)
		}
		without := &Redactor{patterns: append([]secretPattern(nil), with.patterns...)}
		for i := range without.patterns {
			without.patterns[i].needles = nil
		}
		for range 10 {
			var b strings.Builder
			for range 1 + r.IntN(4) {
				if r.IntN(3) == 0 {
					b.WriteString(secretPieces[r.IntN(len(secretPieces))])
				} else {
					rvSample(r, parsed[r.IntN(len(parsed))], &b)
				}
				b.WriteByte(" =:\n"[r.IntN(4)])
			}
			s := b.String()
			got, gk := with.Redact(s)
			want, wk := without.Redact(s)
			cases++
			if got != want || strings.Join(gk, ",") != strings.Join(wk, ",") {
				t.Fatalf("patterns %q text %q:\n with %q %v\n without %q %v", pats, s, got, gk, want, wk)
			}
		}
	}
	t.Logf("%d texts", cases)
}
