package core

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/engram-dev/engram/internal/memory/policy"
)

// Identifiers of owners, agents and sessions: what platforms use for user
// ids (UUIDs, emails, "tenant:user-42"), never free text.
var scopeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,255}$`)

const ScopeIDRule = "must be 1-256 characters of letters, digits and . _ : @ + -, starting with a letter or digit"

// FieldErrors collects every problem of one request. Prefix is put before
// every field name, e.g. "items[3]." for the fourth item of a batch.
type FieldErrors struct {
	Prefix string
	list   []FieldError
}

func (f *FieldErrors) Add(field, format string, args ...any) {
	f.list = append(f.list, FieldError{Field: f.Prefix + field, Message: fmt.Sprintf(format, args...)})
}

func (f *FieldErrors) Err() error {
	if len(f.list) == 0 {
		return nil
	}
	return &ValidationError{Fields: f.list}
}

func (f *FieldErrors) Owner(owner string) {
	if owner == "" {
		f.Add("owner", "is required")
	} else if !scopeID.MatchString(owner) {
		f.Add("owner", ScopeIDRule)
	}
}

// SessionKey checks an owner and a session id (required).
func (f *FieldErrors) SessionKey(owner, id string) {
	f.Owner(owner)
	if id == "" {
		f.Add("sessionId", "is required")
	} else if !ValidScopeID(id) {
		f.Add("sessionId", ScopeIDRule)
	}
}

// scope checks the optional agent and session ids.
func (f *FieldErrors) Scope(agent, session string) {
	if agent != "" && !scopeID.MatchString(agent) {
		f.Add("agent", ScopeIDRule)
	}
	if session != "" && !scopeID.MatchString(session) {
		f.Add("session", ScopeIDRule)
	}
}

func (f *FieldErrors) ID(field, id string) {
	if id == "" {
		f.Add(field, "is required")
	} else if !ValidID(id) {
		f.Add(field, "must be a memory id (a UUID such as 0190c3f2-7e9a-7b3c-9d4e-5f6a7b8c9d0e)")
	}
}

// text checks free text: required, valid UTF-8, no NUL or other control
// characters (PostgreSQL text cannot hold NUL), at most max bytes.
func (f *FieldErrors) Text(field, s string, max int) {
	switch {
	case strings.TrimSpace(s) == "":
		f.Add(field, "is required and must not be blank")
	case !utf8.ValidString(s):
		f.Add(field, "must be valid UTF-8")
	case len(s) > max:
		f.Add(field, "is %d bytes, more than the limit of %d", len(s), max)
	default:
		if i := strings.IndexFunc(s, IsForbiddenControl); i >= 0 {
			f.Add(field, "contains the control character U+%04X at byte %d", s[i], i)
		}
	}
}

// RawContentLimit bounds content before redaction. limits.maxContentBytes
// applies to the stored, redacted text, which may be much shorter than what
// was sent (a private key block becomes [REDACTED:private_key]); this hard
// bound keeps the redaction and guard work of one input small whatever the
// request body limit is.
func RawContentLimit(maxContentBytes int) int {
	return max(4*maxContentBytes, 16<<10)
}

// storedSize checks the size of text as it will be stored (after
// redaction); raw is what was sent, to say so when redaction changed it.
func (f *FieldErrors) StoredSize(field, raw, stored string, max int) {
	if len(stored) <= max {
		return
	}
	if stored != raw {
		f.Add(field, "is %d bytes after redaction of secrets, more than the limit of %d", len(stored), max)
		return
	}
	f.Add(field, "is %d bytes, more than the limit of %d", len(stored), max)
}

// IsForbiddenControl reports whether r is a control character free text may
// not hold (PostgreSQL text cannot hold NUL; the others break display).
func IsForbiddenControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || r == 0x7f
}

func (f *FieldErrors) Source(s Source) Source {
	switch s {
	case "":
		return SourceAgent
	case SourceUser, SourceAgent, SourceSystem, SourceJob:
		return s
	}
	f.Add("source", "%q must be user, agent, system or job", s)
	return s
}

func (f *FieldErrors) Category(p *policy.Policy, name string) string {
	if name == "" {
		return p.DefaultCategory()
	}
	if _, ok := p.Category(name); !ok {
		f.Add("category", "%q is not a category of this runtime's policy (one of: %s)", name, strings.Join(p.CategoryNames(), ", "))
	}
	return name
}

func (f *FieldErrors) Importance(v int) int {
	if v == 0 {
		return 5
	}
	if v < 1 || v > 10 {
		f.Add("importance", "%d must be within 1..10", v)
	}
	return v
}

// ttl parses an optional per-memory ttl; nil means the category's.
func (f *FieldErrors) TTL(s string) *time.Duration {
	if s == "" {
		return nil
	}
	d, err := policy.ParseDuration(s)
	if err != nil {
		f.Add("ttl", "%v", err)
		return nil
	}
	v := time.Duration(d)
	return &v
}

func (f *FieldErrors) TopK(p *policy.Policy, k int) int {
	if k == 0 {
		return p.Search.DefaultTopK
	}
	if k < 1 || k > p.Limits.MaxTopK {
		f.Add("topK", "%d must be within 1..%d", k, p.Limits.MaxTopK)
	}
	return k
}

func (f *FieldErrors) Categories(p *policy.Policy, names []string) {
	for i, n := range names {
		if _, ok := p.Category(n); !ok {
			f.Add(fmt.Sprintf("categories[%d]", i), "%q is not a category of this runtime's policy", n)
		}
	}
	if len(names) > len(p.Categories) && !hasDuplicates(names) {
		f.Add("categories", "lists more categories than the policy has")
	}
}

func hasDuplicates(s []string) bool {
	c := slices.Clone(s)
	slices.Sort(c)
	return len(slices.Compact(c)) != len(s)
}

func (f *FieldErrors) Finite(field string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		f.Add(field, "must be a finite number")
	}
}

// CheckProtected refuses a non-user write into a protected category, or
// into a category the policy no longer has (see protectedFor).
func CheckProtected(p *policy.Policy, category string, src Source) error {
	if c, ok := p.Category(category); (!ok || c.Protected) && src != SourceUser {
		return fmt.Errorf("%w (category %q, source %q)", ErrProtected, category, src)
	}
	return nil
}

// limit is a page size asked for: byDefault when v is 0, else v, which
// must be within 1..most.
func (f *FieldErrors) Limit(v, byDefault, most int) int {
	if v == 0 {
		return byDefault
	}
	if v < 1 || v > most {
		f.Add("limit", "%d must be within 1..%d", v, most)
	}
	return v
}

// cursor records a page cursor its decoder refused (err).
func (f *FieldErrors) Cursor(err error) {
	if err != nil {
		f.Add("cursor", "is not a cursor returned by a previous page")
	}
}

// Len is the number of problems collected so far.
func (f *FieldErrors) Len() int { return len(f.list) }

// Append adds the problems of other (already prefixed by other's Prefix).
func (f *FieldErrors) Append(other *FieldErrors) { f.list = append(f.list, other.list...) }
