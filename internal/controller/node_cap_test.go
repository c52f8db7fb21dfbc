package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestTenantNodesAreCapped: which databases the node runners follow, by
// the connection ids that reach each (issue 26's eighth review, HIGH 1 c:
// nothing capped the nodes of tenant-run servers).
func TestTenantNodesAreCapped(t *testing.T) {
	tenantDBs := func(ns string, n int) map[string]dbTarget {
		out := map[string]dbTarget{}
		for i := range n {
			out[fmt.Sprintf("u@own-%s:5432/db%02d", ns, i)] = dbTarget{ids: []string{fmt.Sprintf("secret/%s/s%02d/uri", ns, i)}}
		}
		return out
	}
	platform := func(n int) map[string]dbTarget {
		out := map[string]dbTarget{}
		for i := range n {
			out[fmt.Sprintf("admin@pg:5432/shared%02d", i)] = dbTarget{ids: []string{fmt.Sprintf("database/d%02d", i)}, platform: true}
		}
		return out
	}
	union := func(ms ...map[string]dbTarget) map[string]dbTarget {
		out := map[string]dbTarget{}
		for _, m := range ms {
			maps.Copy(out, m)
		}
		return out
	}
	many := map[string]dbTarget{}
	for i := range 30 {
		maps.Copy(many, tenantDBs(fmt.Sprintf("ns%02d", i), 2))
	}
	for _, c := range []struct {
		name                      string
		dbs                       map[string]dbTarget
		perNS, total              int
		wantFollowed, wantTenant  int
		wantOverIn, wantOverWhy   string
		wantPlatform, wantFirstOf int // platform followed; namespaces with their first database followed
	}{
		{name: "under the caps", dbs: union(tenantDBs("a", 3), platform(2)), perNS: 4, total: 16, wantFollowed: 5, wantTenant: 3, wantPlatform: 2},
		{name: "one namespace over its cap", dbs: union(tenantDBs("a", 10), tenantDBs("b", 1), platform(3)), perNS: 4, total: 16,
			wantFollowed: 8, wantTenant: 5, wantOverIn: "own-a", wantOverWhy: "namespace a has more than 4", wantPlatform: 3},
		{name: "over the total: every namespace's first before any second", dbs: union(many, platform(70)), perNS: 4, total: 16,
			wantFollowed: 86, wantTenant: 16, wantOverIn: "own-ns", wantOverWhy: "at most 16 databases", wantPlatform: 70, wantFirstOf: 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			follow, over := followedDatabases(c.dbs, c.perNS, c.total)
			tenant, plat, firsts := 0, 0, 0
			for key := range follow {
				if c.dbs[key].platform {
					plat++
					continue
				}
				tenant++
				if strings.HasSuffix(key, "/db00") {
					firsts++
				}
			}
			if len(follow) != c.wantFollowed || tenant != c.wantTenant || plat != c.wantPlatform {
				t.Errorf("followed %d (%d tenant-run, %d platform), want %d (%d, %d)", len(follow), tenant, plat, c.wantFollowed, c.wantTenant, c.wantPlatform)
			}
			if c.wantFirstOf > 0 && firsts != c.wantFirstOf {
				t.Errorf("the first database of %d namespaces followed, want %d (round-robin)", firsts, c.wantFirstOf)
			}
			if len(follow)+len(over) != len(c.dbs) {
				t.Errorf("%d followed and %d over the cap, of %d", len(follow), len(over), len(c.dbs))
			}
			for key, why := range over {
				if !strings.Contains(key, c.wantOverIn) || !strings.Contains(why, c.wantOverWhy) {
					t.Errorf("%s not followed because %q, want a database of %q because %q", key, why, c.wantOverIn, c.wantOverWhy)
				}
			}
			if again, _ := followedDatabases(c.dbs, c.perNS, c.total); !maps.Equal(again, follow) {
				t.Errorf("a second selection differs from the first")
			}
		})
	}
}

// TestTenantNodesOverTheCapAreNotFollowed: one namespace's connection
// Secrets name more databases than MaxTenantNodesPerNamespace (on the
// real server): the lock watchdog's runner follows only the cap of them,
// says which it leaves out and why, and still follows the platform's.
func TestTenantNodesOverTheCapAreNotFollowed(t *testing.T) {
	o := Options{TenantLockWatchInterval: time.Second}.withDefaults()
	pools := newPoolCache(o)
	t.Cleanup(func() { closePools(pools) })
	ids := []string{"database/main"}
	for i := range MaxTenantNodesPerNamespace + 2 {
		ids = append(ids, fmt.Sprintf("secret/team-a/own-%d/uri", i))
	}
	for _, id := range ids {
		if _, err := pools.get(id, testenv.NewDatabase(t)); err != nil {
			t.Fatal(err)
		}
		pools.prove(id)
	}
	var mu sync.Mutex
	var logged []string
	dog := newLockWatchdog(nil, pools, nil, o)
	t.Cleanup(dog.closeAll)
	dog.nodeRunner.log = funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{})
	for range 2 {
		dog.round(testContext(t))
	}

	dbs := pools.databases()
	dog.mu.Lock()
	followed := slices.Sorted(maps.Keys(dog.nodes))
	dog.mu.Unlock()
	tenantRun := 0
	for _, key := range followed {
		if !dbs[key].platform {
			tenantRun++
		}
	}
	if len(followed) != MaxTenantNodesPerNamespace+1 || tenantRun != MaxTenantNodesPerNamespace {
		t.Errorf("the runner follows %d databases (%d tenant-run), want %d tenant-run and the platform's: %v", len(followed), tenantRun, MaxTenantNodesPerNamespace, followed)
	}
	mu.Lock()
	defer mu.Unlock()
	warned := 0
	for _, line := range logged {
		if strings.Contains(line, "is not looked at") && strings.Contains(line, "namespace team-a has more than") {
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("%d warnings name namespace team-a over two rounds, want 2 (one per database left out, once): %q", warned, logged)
	}
}

// TestTenantRunNodeWatchesANamespaceOfRoles (issue 26, what stays per
// node): the lock watchdog of a tenant-run node keeps at most
// tenant.MaxTenantWatchedRoles roles; a platform database and its Citus
// workers keep the default.
func TestTenantRunNodeWatchesANamespaceOfRoles(t *testing.T) {
	w := &lockWatchdog{}
	for _, c := range []struct {
		n    node
		want int
	}{
		{node{key: "tenant"}, tenant.MaxTenantWatchedRoles},
		{node{key: "platform", followWorkers: true}, 0},
		{node{key: "platform worker w:5432", worker: "w:5432"}, 0},
	} {
		if got := w.policyFor(c.n).MaxRoles; got != c.want {
			t.Errorf("node %s: the watchdog keeps at most %d roles, want %d (0: the default)", c.n.key, got, c.want)
		}
	}
}
