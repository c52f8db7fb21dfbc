package core

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// canonicalUUID is the textbook form of a UUID, written independently of
// ValidID's hand-rolled loop, which the fuzzer compares it with.
var canonicalUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// FuzzValidID: ValidID agrees with the regular expression of a canonical
// UUID; case does not change validity (PostgreSQL's uuid type reads both);
// a memory id is never anything a URL path or SQL would have to escape.
func FuzzValidID(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		valid := ValidID(s)
		if valid != canonicalUUID.MatchString(s) {
			t.Fatalf("ValidID(%q) = %v, the canonical form says %v", s, valid, !valid)
		}
		if ValidID(strings.ToLower(s)) != valid || ValidID(strings.ToUpper(s)) != valid {
			t.Fatalf("ValidID(%q) depends on case", s)
		}
		if valid && url.PathEscape(s) != s {
			t.Fatalf("valid id %q needs escaping in a path", s)
		}
		if !ValidID(NewID()) {
			t.Fatal("NewID made an invalid id")
		}
	})
}

// FuzzValidScopeID: an owner, agent or session id that passes is plain
// ASCII of 1-256 bytes that stands for itself in a URL path segment (the
// service routes /v1/owners/{owner}/...), so percent-encoding cannot
// make two spellings of one owner, and it can never be a path trick
// ("..", "/", "%2F"). The request validation and the credential check
// (ValidScopeID) apply the same rule.
func FuzzValidScopeID(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		valid := ValidScopeID(s)
		fe := &FieldErrors{}
		fe.Owner(s)
		if (fe.Err() == nil) != valid {
			t.Fatalf("ValidScopeID(%q) = %v but the request check says %v", s, valid, fe.Err())
		}
		if !valid {
			if fe.Err() == nil || !strings.Contains(fe.Err().Error(), "owner") {
				t.Fatalf("invalid owner %q: error %v does not name the field", s, fe.Err())
			}
			return
		}
		if len(s) < 1 || len(s) > 256 {
			t.Fatalf("valid id %q is %d bytes", s, len(s))
		}
		for i := 0; i < len(s); i++ {
			if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`/\%?#"'<>;,`, c) >= 0 {
				t.Fatalf("valid id %q holds %q", s, c)
			}
		}
		if s == "." || s == ".." || strings.HasPrefix(s, ".") {
			t.Fatalf("valid id %q is a path segment of its own", s)
		}
		if got := url.PathEscape(s); got != s {
			t.Fatalf("valid id %q is escaped in a path as %q", s, got)
		}
		if back, err := url.PathUnescape(s); err != nil || back != s {
			t.Fatalf("valid id %q reads back from a path as %q, %v", s, back, err)
		}
	})
}
