package controller

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// fakeCoordinator makes the fresh database of a throw-away instance say,
// as its superuser may, that it is a Citus coordinator with n workers: the
// first at a counting listener on 127.0.0.1, the others at loopback
// addresses that refuse. It returns the database's URL and the listener's
// count of connections.
func fakeCoordinator(t *testing.T, instance string, n int) (string, *atomic.Int64) {
	t.Helper()
	in := testenv.NewInstance(t, instance)
	in.Start(t)
	url := in.NewDatabase(t)
	addr, dialled := countingListener(t, false)
	_, port, _ := net.SplitHostPort(addr)
	admin := testenv.NewPool(t, url, 1)
	for _, stmt := range []string{
		`INSERT INTO pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion) VALUES (987654, 'citus', 10, 2200, false, '12.1')`,
		`CREATE TABLE public.pg_dist_local_group (groupid int)`,
		`INSERT INTO public.pg_dist_local_group VALUES (0)`,
		`CREATE TABLE public.pg_dist_node (nodeid int, nodename text, nodeport int, isactive bool, noderole text, shouldhaveshards bool, groupid int)`,
		fmt.Sprintf(`INSERT INTO public.pg_dist_node SELECT g, CASE WHEN g = 1 THEN '127.0.0.1' ELSE '127.0.' || (g / 250) || '.' || (g %% 250 + 2) END,
			%s, true, 'primary', true, g FROM generate_series(1, %d) g`, port, n),
	} {
		if _, err := admin.Exec(testContext(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// The fake catalog rows go with the database; the instance is this
	// test's.
	return url, dialled
}

// workerNodes counts the runner's worker nodes after two rounds (the
// first reads the coordinator's workers, the second looks at them).
func workerNodes(t *testing.T, r *nodeRunner) int {
	t.Helper()
	for range 2 {
		r.round(testContext(t))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k := range r.nodes {
		if strings.Contains(k, " worker ") {
			n++
		}
	}
	return n
}

// TestTenantServerStartsNoWorkerNodes (issue 26's fifth review,
// MEDIUM 3a): a tenant's connection Secret may name a server the tenant
// runs, where its admin is a superuser; provisioning there succeeds, so
// the pool is proven. The server said it was a Citus coordinator with 300
// workers, and the runner started a goroutine per worker and dialled each
// every interval with the tenant's credentials: addresses nobody proved.
// Now the workers of a tenant's Secret are never followed; those of the
// platform team's connections are, up to tenant.MaxCitusWorkers.
func TestTenantServerStartsNoWorkerNodes(t *testing.T) {
	url, dialled := fakeCoordinator(t, "controller-fakecitus", 300)
	o := Options{TenantLockWatchInterval: time.Second}.withDefaults()

	pools := newPoolCache(o)
	t.Cleanup(func() { closePools(pools) })
	if _, err := pools.get("secret/team-a/own-server/uri", url); err != nil {
		t.Fatal(err)
	}
	pools.prove("secret/team-a/own-server/uri") // provisioning there succeeded
	dog := newLockWatchdog(nil, pools, nil, o)
	t.Cleanup(dog.closeAll)
	if n := workerNodes(t, dog.nodeRunner); n != 0 {
		t.Fatalf("the runner looks at %d worker nodes listed by a tenant's own server; want none", n)
	}
	if got := dialled.Load(); got != 0 {
		t.Fatalf("the address the tenant's server lists was dialled %d time(s); want never", got)
	}

	// The same server as the platform team's connection: 300 workers are
	// more than the operator follows, so none is.
	platform := newPoolCache(o)
	t.Cleanup(func() { closePools(platform) })
	if _, err := platform.get("cluster/fake", url); err != nil {
		t.Fatal(err)
	}
	platform.prove("cluster/fake")
	dog2 := newLockWatchdog(nil, platform, nil, o)
	t.Cleanup(dog2.closeAll)
	if n := workerNodes(t, dog2.nodeRunner); n != 0 {
		t.Fatalf("the runner looks at %d worker nodes of a coordinator listing 300; want none over the cap", n)
	}
}
