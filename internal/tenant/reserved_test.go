package tenant

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// usesReserved says whether role may use the reserved connection slots.
func usesReserved(t *testing.T, superURL, role string) bool {
	t.Helper()
	var uses bool
	if err := testenv.NewPool(t, superURL, 1).QueryRow(testCtx(t),
		`SELECT pg_has_role($1, 'pg_use_reserved_connections', 'USAGE')`, role).Scan(&uses); err != nil {
		t.Fatal(err)
	}
	return uses
}

// TestAdminTakesReservedConnections: on PostgreSQL 16+, a CREATEROLE admin
// that holds pg_use_reserved_connections WITH ADMIN OPTION only (no
// inherited privileges) grants it to itself at provisioning, so it may use
// the reserved slots when tenants fill the others; the next pass changes
// nothing. An admin without the ADMIN option cannot (PostgreSQL refuses:
// the DBA's grant of docs/security.md is needed): provisioning works and
// says nothing about it.
func TestAdminTakesReservedConnections(t *testing.T) {
	const change = "granted pg_use_reserved_connections to the admin role"
	pool, url, superURL := restrictedAdmin(t, true)
	cfg := mustParseConfig(t, url)
	admin := cfg.User
	spec := newSpec(uniqueSchema(t, "engram_reserved"), 3)
	res := mustProvision(t, pool, superURL, spec)
	if slices.Contains(res.Changes, change) || usesReserved(t, superURL, admin) {
		t.Fatalf("an admin without the ADMIN option: changes %q; want no grant (it may not)", res.Changes)
	}

	if _, err := testenv.NewPool(t, superURL, 1).Exec(testCtx(t), "GRANT pg_use_reserved_connections TO "+
		pgx.Identifier{admin}.Sanitize()+" WITH ADMIN TRUE, INHERIT FALSE, SET FALSE"); err != nil {
		t.Fatal(err)
	}
	again, err := Provision(testCtx(t), pool, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(again.Changes, change) || !usesReserved(t, superURL, admin) {
		t.Fatalf("an admin with the ADMIN option: changes %q, uses reserved slots %v; want it granted to itself",
			again.Changes, usesReserved(t, superURL, admin))
	}
	third, err := Provision(testCtx(t), pool, spec)
	if err != nil || slices.Contains(third.Changes, change) {
		t.Fatalf("the next pass: changes %q, %v; want no new grant", third.Changes, err)
	}
}
