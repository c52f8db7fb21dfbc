// Package tenanttest provisions a tenant for a test as the operator does
// (internal/tenant) and drops it when the test ends: the suites outside the
// engine that run a service, a job or a store on a tenant of their own
// share it. It is not part of testenv because internal/tenant's own tests
// import testenv. Imported by tests only.
package tenanttest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// Tenant is a provisioned tenant of a test.
type Tenant struct {
	Schema string
	Owner  tenant.Owner
	// LoginURL is the database URL of the tenant's login role, built from
	// the admin URL as the operator builds the Secret's.
	LoginURL string
	// Result is what tenant.Provision returned.
	Result *tenant.Result
}

// dropTimeout bounds the drop at the end of a test.
const dropTimeout = 30 * time.Second

var seq atomic.Int64

// Provision provisions a tenant of a fresh schema named after prefix, with
// embeddings of dims dimensions, on the database of adminURL. The tenant is dropped when the test ends,
// after everything the test registers later has stopped (services and
// pools using the tenant): the drop is registered first and opens its
// own connection.
func Provision(t testing.TB, ctx context.Context, adminURL, prefix string, dims int) *Tenant {
	t.Helper()
	schema := fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
	owner := tenant.Owner{UID: "test-" + schema, Namespace: "test-" + schema, Name: schema}
	t.Cleanup(func() { drop(t, adminURL, schema, owner) })
	admin := testenv.NewPool(t, adminURL, 1)
	res, err := tenant.Provision(ctx, admin, tenant.Spec{Schema: schema, Dimensions: dims, Owner: owner})
	if err != nil {
		t.Fatalf("provisioning %s: %v", schema, err)
	}
	login, err := tenant.LoginURL(adminURL, res.LoginRole, res.Password)
	if err != nil {
		t.Fatalf("login URL of %s: %v", schema, err)
	}
	return &Tenant{Schema: schema, Owner: owner, LoginURL: login, Result: res}
}

// drop removes the tenant; a failure is logged, not failed: the test's
// database is dropped with it anyway.
func drop(t testing.TB, adminURL, schema string, owner tenant.Owner) {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	admin, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		t.Logf("dropping %s: %v", schema, err)
		return
	}
	defer admin.Close()
	if _, err := tenant.Drop(ctx, admin, schema, owner); err != nil {
		t.Logf("dropping %s: %v", schema, err)
	}
}
