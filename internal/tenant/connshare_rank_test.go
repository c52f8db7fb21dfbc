package tenant

import "testing"

// TestRolesBeforeRanksRuntimes: the share ranks runtimes by their oldest
// role, not single roles. On Citus (2 login roles a runtime) concurrent
// passes create every owner role before any login role; ranking roles put
// each login role behind the others' owner roles and refused all racers.
func TestRolesBeforeRanksRuntimes(t *testing.T) {
	// Four racers a..d, owner roles first (OIDs 1-4), then logins (5-8).
	racers := []namespaceRole{
		{oid: 1, uid: "a"}, {oid: 2, uid: "b"}, {oid: 3, uid: "c"}, {oid: 4, uid: "d"},
		{oid: 5, uid: "a"}, {oid: 6, uid: "b"}, {oid: 7, uid: "c"}, {oid: 8, uid: "d"},
	}
	for _, c := range []struct {
		name         string
		roles        []namespaceRole
		uid          string
		perRuntime   int
		older, total int
	}{
		{"oldest racer", racers, "a", 2, 0, 8},
		{"second racer", racers, "b", 2, 2, 8},
		{"newest racer", racers, "d", 2, 6, 8},
		{"not created yet", racers, "e", 2, 8, 10},
		// b has only its owner role so far: it still counts two.
		{"a racer half made", []namespaceRole{{oid: 1, uid: "a"}, {oid: 2, uid: "b"}, {oid: 3, uid: "a"}}, "c", 2, 4, 6},
		{"plain, one role each", []namespaceRole{{oid: 9, uid: "x"}, {oid: 3, uid: "y"}}, "x", 1, 1, 2},
		{"empty namespace", nil, "a", 1, 0, 1},
	} {
		older, total := rolesBefore(c.roles, c.uid, c.perRuntime)
		if older != c.older || total != c.total {
			t.Errorf("%s: rolesBefore = %d older, %d total; want %d, %d", c.name, older, total, c.older, c.total)
		}
	}
}
