package core

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// scopeIDRule is ScopeIDRule as the regular expression ValidScopeID
// writes out.
var scopeIDRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,255}$`)

// TestValidScopeIDMatchesRegexp: the written-out check accepts exactly
// what the rule's regular expression accepts, at the length bounds, for
// every byte at the first and at a later position, and over random ids.
func TestValidScopeIDMatchesRegexp(t *testing.T) {
	cases := []string{"", "a", "0", "-a", ".a", "a-", "user@example.com", "tenant:user-42", "a\n", "a b", "é", "aé",
		strings.Repeat("a", 256), strings.Repeat("a", 257), "a" + strings.Repeat("-", 255), "a" + strings.Repeat("-", 256)}
	for c := range 256 {
		cases = append(cases, string([]byte{byte(c)}), string([]byte{'a', byte(c)}), string([]byte{'a', byte(c), 'b'}))
	}
	alphabet := "aZ09._:@+-/ \n\x00\xff#é"
	r := rand.New(rand.NewPCG(32, 2))
	for range 20000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := ValidScopeID(s), scopeIDRule.MatchString(s); got != want {
			t.Errorf("ValidScopeID(%q) = %v, the rule says %v", s, got, want)
		}
	}
}
