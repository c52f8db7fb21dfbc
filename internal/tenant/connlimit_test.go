package tenant

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestTenantCannotTakeEveryConnection: a tenant's login role could open
// every connection slot the server does not reserve for superusers, and
// then no other tenant could connect (issue 26's third review).
// Provisioning sets a CONNECTION LIMIT: tenant A gets exactly its limit
// (a small share here, so the shared server is not crowded) and the next
// connection fails with "too many connections for role"; tenant B still
// connects. The limit is set once: the next pass changes nothing.
func TestTenantCannotTakeEveryConnection(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	a := newSpec(uniqueSchema(t, "engram_connlim_a"), 3)
	a.Connections = ConnectionPolicy{Share: 1}
	resA := mustProvision(t, pool, url, a)
	resB := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_connlim_b"), 3))
	if resA.ConnectionLimit < 1 || resA.ConnectionLimit > 5 {
		t.Fatalf("A's connection limit = %d; want 1 %% of the server's slots, at least 1", resA.ConnectionLimit)
	}
	if resB.ConnectionLimit < 1 {
		t.Fatalf("B's connection limit = %d; want the default share, never none", resB.ConnectionLimit)
	}
	for range resA.ConnectionLimit {
		loginConn(t, url, resA, resA.Password) // fails the test if refused
	}
	extra, err := pgx.Connect(ctx, testenv.WithUser(url, resA.LoginRole, resA.Password))
	mustRefuseLogin(t, fmt.Sprintf("tenant A's connection %d, over its limit of %d", resA.ConnectionLimit+1, resA.ConnectionLimit), extra, err)
	connB := loginConn(t, url, resB, resB.Password)
	if _, err := connB.Exec(ctx, "SELECT count(*) FROM memories"); err != nil {
		t.Fatalf("tenant B's query while A holds its limit: %v", err)
	}
	if again, err := Provision(ctx, pool, a); err != nil || again.Changed() {
		t.Fatalf("re-provisioning A: %+v, %v; want no change", again, err)
	}
}

// TestConnectionLimitSizing: the share of the slots divided among the
// namespace's runtimes, never above it whatever the need, never below 1; a
// negative share sets none.
func TestConnectionLimitSizing(t *testing.T) {
	for _, c := range []struct {
		p        ConnectionPolicy
		slots, n int
		want     int
	}{
		{ConnectionPolicy{}, 97, 1, 24},
		{ConnectionPolicy{Share: 50}, 297, 1, 148},
		{ConnectionPolicy{Need: 101}, 97, 1, 24},
		{ConnectionPolicy{}, 97, 3, 8},
		{ConnectionPolicy{Share: 1}, 20, 1, 1},
		{ConnectionPolicy{Share: 1}, 20, 4, 1},
		{ConnectionPolicy{Share: 300}, 97, 1, 97},
		{ConnectionPolicy{Share: -1, Need: 10}, 97, 2, -1},
	} {
		if got := c.p.connectionLimit(c.slots, c.n); got != c.want {
			t.Errorf("%+v.connectionLimit(%d, %d) = %d, want %d", c.p, c.slots, c.n, got, c.want)
		}
	}
}
