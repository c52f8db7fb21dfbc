package textguard

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// secretPattern is one kind of secret and how to find it.
type secretPattern struct {
	kind string
	re   *regexp.Regexp
	// keep, when > 0, keeps that capture group (a key name or URL prefix)
	// in front of the redaction marker.
	keep int
	// tail is written after the marker (what the pattern consumed but is not secret).
	tail string
	// accept, when set, must confirm a match (for patterns with false positives).
	accept func(match string) bool
	// needles: one of them is in every match (prefilter.go; nil: none known).
	needles []string
}

// builtinSecrets are tried in order; specific token formats come before the
// generic "password=..." rule so the marker names the precise kind.
var builtinSecrets = []secretPattern{
	{kind: "private_key", re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)},
	{kind: "aws_access_key", re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`)},
	{kind: "aws_secret_key", re: regexp.MustCompile(`(?i)(aws_?secret_?access_?key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}`), keep: 1},
	{kind: "github_token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`)},
	{kind: "gitlab_token", re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_\-]{20,}`)},
	{kind: "anthropic_key", re: regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_\-]{20,}`)},
	{kind: "openai_key", re: regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`)},
	{kind: "slack_token", re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9\-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9/]+`)},
	{kind: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}`)},
	{kind: "bearer_token", re: regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*`), keep: 1},
	{kind: "basic_auth", re: regexp.MustCompile(`(?i)(\bbasic\s+)[A-Za-z0-9+/]{6,}={0,2}`), keep: 1, accept: isBasicCredential},
	{kind: "engram_token", re: regexp.MustCompile(`\bengram_[A-Za-z0-9_\-]{43,}`)},
	{kind: "engram_signed_token", re: regexp.MustCompile(`\begm1\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`)},
	{kind: "url_password", re: regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^/\s@]+@`), keep: 1, tail: "@"},
	// A quoted value is secret up to its closing quote, spaces included
	// ("purple monkey dishwasher").
	{kind: "password", re: regexp.MustCompile(`(?i)(\b(?:password|passwd|passphrase|pwd|secret)\s*[:=]\s*")[^"\n]+`), keep: 1},
	{kind: "password", re: regexp.MustCompile(`(?i)(\b(?:password|passwd|passphrase|pwd|secret)\s*[:=]\s*')[^'\n]+`), keep: 1},
	{kind: "password", re: regexp.MustCompile(`(?i)(\b(?:password|passwd|passphrase|pwd|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|token|secret[_-]?key|private[_-]?key)["']?\s*[:=]\s*["']?)[^\s"',;]+`), keep: 1},
	// "the passphrase is correct horse battery staple": a passphrase is
	// words, so the rest of the clause goes (over-redacting "the password
	// is stored in the vault" is the cheaper mistake).
	{kind: "password", re: regexp.MustCompile(`(?i)(\b(?:password|passphrase)\s+(?:is|was)\s+["']?)[^"'.,;\n]+`), keep: 1},
}

// isBasicCredential accepts "Basic xxx" only when xxx decodes to user:password,
// so plain English such as "basic understanding" is left alone.
func isBasicCredential(match string) bool {
	fields := strings.Fields(match)
	if len(fields) < 2 {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(fields[len(fields)-1])
	return err == nil && strings.Contains(string(raw), ":")
}

// redactionMarker starts what replaces a secret: [REDACTED:<kind>].
const redactionMarker = "[REDACTED:"

// Redactor removes secrets from text before it is stored or sent to a
// model (embedding server or LLM).
type Redactor struct {
	patterns []secretPattern
}

// NewRedactor builds a Redactor from the policy's redaction settings: the
// built-in secret patterns when builtin is set, then the custom patterns
// (regular expressions; the error names the first that does not compile).
func NewRedactor(builtin bool, patterns []string) (*Redactor, error) {
	var pats []secretPattern
	if builtin {
		pats = append(pats, builtinSecrets...)
	}
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("redaction.patterns[%d]: %w", i, err)
		}
		pats = append(pats, secretPattern{kind: "custom", re: re})
	}
	for i := range pats {
		pats[i].needles = needlesOf(pats[i].re.String())
	}
	return &Redactor{patterns: pats}, nil
}

// Redact returns s with every secret replaced by [REDACTED:<kind>] and the
// sorted kinds found.
func (r *Redactor) Redact(s string) (string, []string) {
	var kinds []string
	ascii := isASCII(s)
	lower := strings.ToLower(s)
	for _, p := range r.patterns {
		if !mayMatch(p.needles, lower, ascii) {
			continue
		}
		// ReplaceAllStringFunc copies s even when nothing matches: a text
		// without secrets (most) is read, not copied once per pattern
		// (issue 26, twenty-second review: an extraction's batch dedup
		// redacts up to 100 stored texts of 64 KiB).
		if !p.re.MatchString(s) {
			continue
		}
		found := false
		s = p.re.ReplaceAllStringFunc(s, func(m string) string {
			if p.accept != nil && !p.accept(m) {
				return m
			}
			prefix := ""
			if p.keep > 0 {
				if sub := p.re.FindStringSubmatch(m); len(sub) > p.keep {
					prefix = sub[p.keep]
				}
			}
			// Already redacted: redacting twice changes nothing. Only a
			// marker alone counts: "password=[REDACTED:x]hunter2" still
			// holds a secret after the marker.
			if isMarker(strings.TrimSuffix(m[len(prefix):], p.tail)) {
				return m
			}
			found = true
			return prefix + redactionMarker + p.kind + "]" + p.tail
		})
		if found && !slices.Contains(kinds, p.kind) {
			kinds = append(kinds, p.kind)
		}
		if found {
			ascii, lower = isASCII(s), strings.ToLower(s)
		}
	}
	slices.Sort(kinds)
	return s, kinds
}

// Redacted is Redact without the kinds, for text sent to a model.
func (r *Redactor) Redacted(s string) string {
	out, _ := r.Redact(s)
	return out
}

// isMarker reports whether s is exactly one redaction marker.
func isMarker(s string) bool {
	kind, ok := strings.CutPrefix(s, redactionMarker)
	if !ok {
		return false
	}
	kind, ok = strings.CutSuffix(kind, "]")
	return ok && kind != "" && strings.Trim(kind, "abcdefghijklmnopqrstuvwxyz_") == ""
}

// Leftover returns a secret one of r's patterns still finds in redacted
// text (anything but a marker where the secret was), or "": what the
// tests of every path that stores text check.
func (r *Redactor) Leftover(out string) string {
	for _, p := range r.patterns {
		for _, loc := range p.re.FindAllStringSubmatchIndex(out, -1) {
			m := out[loc[0]:loc[1]]
			if p.accept != nil && !p.accept(m) {
				continue
			}
			secret := m
			if p.keep > 0 && loc[2*p.keep] >= 0 {
				secret = out[loc[2*p.keep+1]:loc[1]]
			}
			if !isMarker(strings.TrimSuffix(secret, p.tail)) {
				return p.kind + ": " + secret
			}
		}
	}
	return ""
}
