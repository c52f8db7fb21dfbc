package memory

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Identifiers of owners, agents and sessions: what platforms use for user
// ids (UUIDs, emails, "tenant:user-42"), never free text.
var scopeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,255}$`)

const scopeIDRule = "must be 1-256 characters of letters, digits and . _ : @ + -, starting with a letter or digit"

// fieldErrors collects every problem of one request.
type fieldErrors struct {
	prefix string
	list   []FieldError
}

func (f *fieldErrors) add(field, format string, args ...any) {
	f.list = append(f.list, FieldError{Field: f.prefix + field, Message: fmt.Sprintf(format, args...)})
}

func (f *fieldErrors) err() error {
	if len(f.list) == 0 {
		return nil
	}
	return &ValidationError{Fields: f.list}
}

func (f *fieldErrors) owner(owner string) {
	if owner == "" {
		f.add("owner", "is required")
	} else if !scopeID.MatchString(owner) {
		f.add("owner", scopeIDRule)
	}
}

// scope checks the optional agent and session ids.
func (f *fieldErrors) scope(agent, session string) {
	if agent != "" && !scopeID.MatchString(agent) {
		f.add("agent", scopeIDRule)
	}
	if session != "" && !scopeID.MatchString(session) {
		f.add("session", scopeIDRule)
	}
}

func (f *fieldErrors) id(field, id string) {
	if id == "" {
		f.add(field, "is required")
	} else if !ValidID(id) {
		f.add(field, "must be a memory id (a UUID such as 0190c3f2-7e9a-7b3c-9d4e-5f6a7b8c9d0e)")
	}
}

// text checks free text: required, valid UTF-8, no NUL or other control
// characters (PostgreSQL text cannot hold NUL), at most max bytes.
func (f *fieldErrors) text(field, s string, max int) {
	switch {
	case strings.TrimSpace(s) == "":
		f.add(field, "is required and must not be blank")
	case !utf8.ValidString(s):
		f.add(field, "must be valid UTF-8")
	case len(s) > max:
		f.add(field, "is %d bytes, more than the limit of %d", len(s), max)
	default:
		if i := strings.IndexFunc(s, isForbiddenControl); i >= 0 {
			f.add(field, "contains the control character U+%04X at byte %d", s[i], i)
		}
	}
}

// rawContentLimit bounds content before redaction. limits.maxContentBytes
// applies to the stored, redacted text, which may be much shorter than what
// was sent (a private key block becomes [REDACTED:private_key]); this hard
// bound keeps the redaction and guard work of one input small whatever the
// request body limit is.
func rawContentLimit(maxContentBytes int) int {
	return max(4*maxContentBytes, 16<<10)
}

// storedSize checks the size of text as it will be stored (after
// redaction); raw is what was sent, to say so when redaction changed it.
func (f *fieldErrors) storedSize(field, raw, stored string, max int) {
	if len(stored) <= max {
		return
	}
	if stored != raw {
		f.add(field, "is %d bytes after redaction of secrets, more than the limit of %d", len(stored), max)
		return
	}
	f.add(field, "is %d bytes, more than the limit of %d", len(stored), max)
}

func isForbiddenControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || r == 0x7f
}

func (f *fieldErrors) source(s Source) Source {
	switch s {
	case "":
		return SourceAgent
	case SourceUser, SourceAgent, SourceSystem, SourceJob:
		return s
	}
	f.add("source", "%q must be user, agent, system or job", s)
	return s
}

func (f *fieldErrors) category(p *Policy, name string) string {
	if name == "" {
		return p.DefaultCategory()
	}
	if _, ok := p.Category(name); !ok {
		f.add("category", "%q is not a category of this runtime's policy (one of: %s)", name, strings.Join(p.CategoryNames(), ", "))
	}
	return name
}

func (f *fieldErrors) importance(v int) int {
	if v == 0 {
		return 5
	}
	if v < 1 || v > 10 {
		f.add("importance", "%d must be within 1..10", v)
	}
	return v
}

// ttl parses an optional per-memory ttl; nil means the category's.
func (f *fieldErrors) ttl(s string) *time.Duration {
	if s == "" {
		return nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		f.add("ttl", "%v", err)
		return nil
	}
	v := time.Duration(d)
	return &v
}

func (f *fieldErrors) topK(p *Policy, k int) int {
	if k == 0 {
		return p.Search.DefaultTopK
	}
	if k < 1 || k > p.Limits.MaxTopK {
		f.add("topK", "%d must be within 1..%d", k, p.Limits.MaxTopK)
	}
	return k
}

func (f *fieldErrors) categories(p *Policy, names []string) {
	for i, n := range names {
		if _, ok := p.Category(n); !ok {
			f.add(fmt.Sprintf("categories[%d]", i), "%q is not a category of this runtime's policy", n)
		}
	}
	if len(names) > len(p.Categories) && !hasDuplicates(names) {
		f.add("categories", "lists more categories than the policy has")
	}
}

func hasDuplicates(s []string) bool {
	c := slices.Clone(s)
	slices.Sort(c)
	return len(slices.Compact(c)) != len(s)
}

func (f *fieldErrors) finite(field string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		f.add(field, "must be a finite number")
	}
}

// checkProtected refuses a non-user write into a protected category, or
// into a category the policy no longer has (see protectedFor).
func checkProtected(p *Policy, category string, src Source) error {
	if c, ok := p.Category(category); (!ok || c.Protected) && src != SourceUser {
		return fmt.Errorf("%w (category %q, source %q)", ErrProtected, category, src)
	}
	return nil
}

// limit is a page size asked for: byDefault when v is 0, else v, which
// must be within 1..most.
func (f *fieldErrors) limit(v, byDefault, most int) int {
	if v == 0 {
		return byDefault
	}
	if v < 1 || v > most {
		f.add("limit", "%d must be within 1..%d", v, most)
	}
	return v
}

// cursor records a page cursor its decoder refused (err).
func (f *fieldErrors) cursor(err error) {
	if err != nil {
		f.add("cursor", "is not a cursor returned by a previous page")
	}
}
