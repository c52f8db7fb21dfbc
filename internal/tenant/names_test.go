package tenant

import (
	"errors"
	"strings"
	"testing"
)

func TestSchemaName(t *testing.T) {
	long := strings.Repeat("very-long-team-name-", 5)
	tests := []struct {
		namespace, name, want string
	}{
		{"team-a", "support-bot", "engram_team_a_support_bot_6daa5987"},
		{"team", "a-bot", "engram_team_a_bot_5fc77605"},
		{"a", "b", "engram_a_b_c14cddc0"},
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
		{"username key", map[string][]byte{"host": []byte("db"), "username": []byte("app"), "password": []byte("pw")}, "", "postgres://app:pw@db:5432/postgres", false},
		{"any database in the uri", map[string][]byte{"uri": []byte("postgresql://postgres:pw@pg-rw.db:5432/*")}, "", "postgresql://postgres:pw@pg-rw.db:5432/postgres", false},
		{"any database in dbname", map[string][]byte{"host": []byte("pg-rw"), "user": []byte("postgres"), "password": []byte("pw"), "dbname": []byte("*")}, "uri-missing", "postgres://postgres:pw@pg-rw:5432/postgres", false},
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

// TestSchemaNamesAreInjective: pairs whose readable parts are equal (the
// takeover of issue 12) and long pairs cut to 63 bytes get distinct names.
func TestSchemaNamesAreInjective(t *testing.T) {
	long := strings.Repeat("x", 60)
	pairs := [][2]string{
		{"team", "a-bot"}, {"team-a", "bot"}, {"team-a-bot", "x"}, {"pa", "x-bot"}, {"pa-x", "bot"},
		{"a--b", "c"}, {"a", "b--c"}, {"a-", "-b"},
		{long, "bot-1"}, {long, "bot-2"}, {long + "-y", "bot-1"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		s := SchemaName(p[0], p[1])
		if !ValidSchemaName(s) || len(s) > MaxIdentifierBytes {
			t.Errorf("SchemaName(%q, %q) = %q is not a valid identifier", p[0], p[1], s)
		}
		if prev, ok := seen[s]; ok {
			t.Errorf("SchemaName collides: %v and %v both give %q", prev, p, s)
		}
		seen[s] = p
		if LegacySchemaName(p[0], p[1]) == s {
			t.Errorf("the new name of %v equals the legacy one", p)
		}
	}
	if LegacySchemaName("team", "a-bot") != LegacySchemaName("team-a", "bot") {
		t.Error("the legacy names no longer show the collision this test is about")
	}
}

func TestDecideClaim(t *testing.T) {
	me := Owner{UID: "u-me", Namespace: "ns", Name: "rt"}
	mine := parseMarker(ptr(me.marker()))
	other := parseMarker(ptr(Owner{UID: "u-other", Namespace: "pa", Name: "x-bot"}.marker()))
	earlierMe := parseMarker(ptr(Owner{UID: "u-old", Namespace: "ns", Name: "rt"}.marker()))
	legacyMine := parseMarker(ptr("managed-by=engram; tenant=ns/rt"))
	legacyOther := parseMarker(ptr("managed-by=engram; tenant=pa/x-bot"))
	legacyRole := parseMarker(ptr("managed-by=engram"))
	foreign := parseMarker(ptr("the app's data"))
	tests := []struct {
		name     string
		exists   bool
		m        marker
		claim    Claim
		kind     string
		schemaOK bool
		want     claimAction
		err      error
	}{
		{"missing", false, marker{}, Claim{}, "schema", false, claimCreate, nil},
		{"mine", true, mine, Claim{}, "schema", false, claimOurs, nil},
		{"no comment", true, marker{}, Claim{}, "schema", false, 0, ErrNotManaged},
		{"foreign comment", true, foreign, Claim{}, "schema", false, 0, ErrNotManaged},
		{"another runtime", true, other, Claim{}, "schema", false, 0, ErrOwnedByOther},
		{"another runtime, adopt its uid", true, other, Claim{AdoptFromUID: "u-other"}, "schema", false, 0, ErrOwnedByOther},
		{"earlier me, no annotation", true, earlierMe, Claim{}, "schema", false, 0, ErrOwnedByOther},
		{"earlier me, wrong uid", true, earlierMe, Claim{AdoptFromUID: "u-guess"}, "schema", false, 0, ErrOwnedByOther},
		{"earlier me, adopted", true, earlierMe, Claim{AdoptFromUID: "u-old"}, "schema", false, claimRemark, nil},
		{"legacy mine, not in status", true, legacyMine, Claim{}, "schema", false, 0, ErrOwnedByOther},
		{"legacy mine, in status", true, legacyMine, Claim{LegacySchema: true}, "schema", false, claimRemark, nil},
		{"legacy other, in my status", true, legacyOther, Claim{LegacySchema: true}, "schema", false, 0, ErrOwnedByOther},
		{"legacy role, schema mine", true, legacyRole, Claim{LegacySchema: true}, "role", true, claimRemark, nil},
		{"legacy role, schema not mine", true, legacyRole, Claim{LegacySchema: true}, "role", false, 0, ErrOwnedByOther},
		{"legacy role, not in status", true, legacyRole, Claim{}, "role", true, 0, ErrOwnedByOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideClaim(tc.exists, tc.m, me, tc.claim, tc.kind, "obj", tc.schemaOK)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("decideClaim = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestLoginURLKeepsNothingOfTheAdmin: an admin URL carrying credentials or
// options in its query must not pass any of them to a tenant.
func TestLoginURLKeepsNothingOfTheAdmin(t *testing.T) {
	admin := "postgres://postgres:adminpw@db.example:5433/mem?sslmode=verify-full&sslrootcert=/ca.pem&connect_timeout=5" +
		"&user=postgres&password=adminpw2&options=-c%20role%3Dpostgres&sslpassword=keypw&sslkey=/admin.key&sslcert=/admin.crt" +
		"&passfile=/root/.pgpass&service=admin&servicefile=/etc/pg_service.conf&host=evil&port=1&dbname=postgres&application_name=x"
	got, err := LoginURL(admin, "engram_t_app", "tenantpw")
	if err != nil {
		t.Fatal(err)
	}
	want := "postgres://engram_t_app:tenantpw@db.example:5433/mem?connect_timeout=5&sslmode=verify-full&sslrootcert=%2Fca.pem"
	if got != want {
		t.Fatalf("LoginURL =\n  %s\nwant\n  %s", got, want)
	}
	for _, leak := range []string{"adminpw", "postgres@", "options", "sslpassword", "keypw", "sslkey", "sslcert", "passfile", "service", "evil", "dbname"} {
		if strings.Contains(got, leak) {
			t.Errorf("tenant URL contains %q: %s", leak, got)
		}
	}
	if u := AdminUser(admin); u != "postgres" {
		t.Errorf("AdminUser = %q", u)
	}
	if _, err := LoginURL("postgres://u:secret@[bad", "a", "b"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a bad admin URL gives %v; want an error that does not quote it", err)
	}
}
