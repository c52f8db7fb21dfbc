package auth

import (
	"strings"
	"testing"
)

// tok returns a token of n characters that differs per seed.
func tok(seed string, n int) string {
	return (seed + strings.Repeat("x", n))[:n]
}

func TestParseTokens(t *testing.T) {
	admin, app, agent, legacy := tok("admin", 43), tok("app", 50), tok("agent", 43), tok("legacy", 60)
	short := tok("short", 42)
	file := strings.Join([]string{
		"# tokens of team-a",
		"",
		admin + " role=admin name=ops",
		"  " + app + "\trole=app   owner=alice@example.com  ",
		agent + " role=agent owner=alice name=support-bot/alice",
		legacy,                                 // line 6: no role= -> app (upgrade rule)
		short + " role=admin",                  // line 7: too short
		tok("typo", 43) + " rol=agent",         // line 8: unknown attribute
		tok("dup", 43) + " role=app role=x",    // line 9: repeated attribute
		tok("badrole", 43) + " role=root",      // line 10
		tok("badowner", 43) + " owner=a/b",     // line 11: not an owner id
		tok("badname", 43) + " name=two words", // line 12: "words" is not key=value
		agent + " role=admin",                  // line 13: the same token again
		SignedPrefix + tok("s", 50),            // line 14: signed tokens are never listed
		"#" + tok("commented", 50),
	}, "\n")
	set, skipped := ParseTokens([]byte(file))
	if set.Len() != 4 {
		t.Fatalf("loaded %d tokens, want 4; skipped %+v", set.Len(), skipped)
	}
	wantSkipped := map[int]string{7: "shorter than the 43", 8: "unknown attribute", 9: "given twice", 10: "role=",
		11: "owner=", 12: "word 2", 13: "line 5 already", 14: "prefix of signed tokens"}
	if len(skipped) != len(wantSkipped) {
		t.Fatalf("skipped %+v, want lines %v", skipped, wantSkipped)
	}
	for _, s := range skipped {
		want, ok := wantSkipped[s.Line]
		if !ok || !strings.Contains(s.Reason, want) {
			t.Errorf("line %d skipped with %q, want a reason containing %q", s.Line, s.Reason, want)
		}
		// The reason never repeats the token (or a part of it).
		if strings.Contains(s.Reason, "xxxx") || strings.Contains(s.Reason, "words") {
			t.Errorf("line %d: reason %q quotes the line", s.Line, s.Reason)
		}
	}

	for _, tc := range []struct {
		token string
		want  Credential
	}{
		{admin, Credential{Role: RoleAdmin, ID: "ops"}},
		{app, Credential{Role: RoleApp, Owner: "alice@example.com"}},
		{agent, Credential{Role: RoleAgent, Owner: "alice", ID: "support-bot/alice"}},
		{legacy, Credential{Role: RoleApp}},
	} {
		got, ok := set.Lookup(tc.token)
		if !ok {
			t.Fatalf("Lookup(%s...) found nothing", tc.token[:8])
		}
		if tc.want.ID == "" { // nameless: "token:" and 8 hex digits of the digest
			if !strings.HasPrefix(got.ID, "token:") || len(got.ID) != len("token:")+8 {
				t.Errorf("nameless token id = %q", got.ID)
			}
			tc.want.ID = got.ID
		}
		if got != tc.want {
			t.Errorf("Lookup(%s...) = %+v, want %+v", tc.token[:8], got, tc.want)
		}
	}
	for _, bad := range []string{"", short, admin + "x", admin[1:], " " + admin, strings.ToUpper(admin)} {
		if c, ok := set.Lookup(bad); ok {
			t.Errorf("Lookup(%q) = %+v, want no match", bad, c)
		}
	}
}

func TestNewTokenIsLoadable(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if a == b || len(a) < MinTokenLength+len(tokenPrefix) {
		t.Fatalf("NewToken = %q, %q", a, b)
	}
	line := TokenLine(a, RoleAgent, "bob", "bot")
	set, skipped := ParseTokens([]byte(line))
	if len(skipped) != 0 {
		t.Fatalf("a generated line was skipped: %+v", skipped)
	}
	if c, ok := set.Lookup(a); !ok || c != (Credential{Role: RoleAgent, Owner: "bob", ID: "bot"}) {
		t.Fatalf("Lookup = %+v %v", c, ok)
	}
}

func TestRoles(t *testing.T) {
	for _, tc := range []struct {
		r, min Role
		want   bool
	}{
		{RoleAdmin, RoleAdmin, true}, {RoleAdmin, RoleApp, true}, {RoleAdmin, RoleAgent, true},
		{RoleApp, RoleAdmin, false}, {RoleApp, RoleApp, true}, {RoleApp, RoleAgent, true},
		{RoleAgent, RoleAdmin, false}, {RoleAgent, RoleApp, false}, {RoleAgent, RoleAgent, true},
		{Role(""), RoleAgent, false}, {Role("root"), RoleAgent, false},
	} {
		if got := tc.r.Includes(tc.min); got != tc.want {
			t.Errorf("%q.Includes(%q) = %v", tc.r, tc.min, got)
		}
	}
	if _, err := ParseRole("Admin"); err == nil {
		t.Error("roles are case-sensitive")
	}
	bound := Credential{Role: RoleAgent, Owner: "alice"}
	if !bound.MayActFor("alice") || bound.MayActFor("bob") || !(Credential{Role: RoleApp}).MayActFor("bob") {
		t.Error("MayActFor")
	}
}

// TestFirstToken: the token of the first line ParseTokens accepts; comments,
// blank lines and rejected lines before it are passed over.
func TestFirstToken(t *testing.T) {
	good := "engram_" + strings.Repeat("a", 43)
	other := "engram_" + strings.Repeat("b", 43)
	cases := map[string]string{
		"":                         "",
		"# only a comment\n\n":     "",
		"short-token role=admin\n": "",
		good + " role=admin name=admin\n" + other:         good,
		"# c\nshort\n  " + other + " role=app  \n" + good: other,
		good + " role=root\n" + other:                     other,
	}
	for raw, want := range cases {
		if got := FirstToken([]byte(raw)); got != want {
			t.Errorf("FirstToken(%q) = %q, want %q", raw, got, want)
		}
		if set, _ := ParseTokens([]byte(raw)); (set.Len() > 0) != (want != "") {
			t.Errorf("ParseTokens(%q) holds %d tokens but FirstToken = %q", raw, set.Len(), want)
		}
	}
}
