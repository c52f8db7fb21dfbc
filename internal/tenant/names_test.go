package tenant

import (
	"strings"
	"testing"
)

func TestSchemaName(t *testing.T) {
	long := strings.Repeat("very-long-team-name-", 5)
	tests := []struct {
		namespace, name, want string
	}{
		{"team-a", "support-bot", "engram_team_a_support_bot"},
		{"Team.A", "Bot", "engram_team_a_bot"},
		{"a", "b", "engram_a_b"},
	}
	for _, tc := range tests {
		if got := SchemaName(tc.namespace, tc.name); got != tc.want {
			t.Errorf("SchemaName(%q, %q) = %q, want %q", tc.namespace, tc.name, got, tc.want)
		}
	}
	a, b := SchemaName(long, "bot-one"), SchemaName(long, "bot-two")
	for _, s := range []string{a, b, OwnerRole(a), LoginRole(a)} {
		if len(s) > MaxIdentifierBytes {
			t.Errorf("%q is %d bytes, over 63", s, len(s))
		}
		if !ValidSchemaName(s) {
			t.Errorf("%q is not a valid name", s)
		}
	}
	if a == b {
		t.Errorf("two long names collide: %q", a)
	}
	if OwnerRole(a) == LoginRole(a) || !strings.HasSuffix(OwnerRole(a), "_owner") || !strings.HasSuffix(LoginRole(a), "_app") {
		t.Errorf("role names of %q: %q, %q", a, OwnerRole(a), LoginRole(a))
	}
}

func TestValidSchemaName(t *testing.T) {
	for s, want := range map[string]bool{
		"engram_a": true, "_x": true, "": false, "pg_evil": false, "public": false,
		"1abc": false, `a"b`: false, "Upper": false, "a-b": false, strings.Repeat("a", 64): false,
	} {
		if got := ValidSchemaName(s); got != want {
			t.Errorf("ValidSchemaName(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"0.6.2", "0.7.0", true}, {"0.7.0", "0.7.0", false}, {"0.8.0", "0.7.0", false}, {"0.10.0", "0.7.0", false}, {"0.7", "0.7.1", true}} {
		if got := versionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("versionLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func TestConnectionURL(t *testing.T) {
	tests := []struct {
		name string
		data map[string][]byte
		key  string
		want string
		err  bool
	}{
		{"uri", map[string][]byte{"uri": []byte("postgres://u:p@db:5432/app")}, "", "postgres://u:p@db:5432/app", false},
		{"custom key", map[string][]byte{"dsn": []byte("postgresql://u@db/app")}, "dsn", "postgresql://u@db/app", false},
		{"fields", map[string][]byte{"host": []byte("db.ns.svc"), "user": []byte("app"), "password": []byte("p@ss/w"), "dbname": []byte("mem")}, "", "postgres://app:p%40ss%2Fw@db.ns.svc:5432/mem", false},
		{"not a uri", map[string][]byte{"uri": []byte("mysql://x")}, "", "", true},
		{"empty", map[string][]byte{}, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConnectionURL(tc.data, tc.key)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("ConnectionURL = %q, %v; want %q (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}
