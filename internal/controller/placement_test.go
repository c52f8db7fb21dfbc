package controller

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// db is a reachable candidate without bounds, labelled tier=std, that
// admits every namespace.
func db(name string, mutate ...func(*candidate)) candidate {
	c := candidate{name: name, labels: map[string]string{"tier": "std"}, reach: metav1.ConditionTrue, maxTenants: -1, maxBytes: -1, admits: labels.Everything()}
	for _, m := range mutate {
		m(&c)
	}
	return c
}

func tenants(n, bound int64) func(*candidate) {
	return func(c *candidate) { c.tenants, c.maxTenants = n, bound }
}

func bytesOf(n, bound int64) func(*candidate) {
	return func(c *candidate) { c.bytes, c.maxBytes = n, bound }
}

func bySelector(s string) placementRequest {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return placementRequest{selector: sel, what: "databaseSelector " + s}
}

// TestPlace is the table of the placement decision: capacity, cordon,
// reachability, selector and name, ties.
func TestPlace(t *testing.T) {
	std := bySelector("tier=std")
	cordoned := func(c *candidate) { c.cordoned = true }
	down := func(c *candidate) { c.reach = metav1.ConditionFalse }
	unchecked := func(c *candidate) { c.reach = metav1.ConditionUnknown }
	cases := []struct {
		name   string
		req    placementRequest
		dbs    []candidate
		want   string // the database; "" when none
		reason string
		msg    string // part of the message
	}{
		{"one database", std, []candidate{db("a")}, "a", "Placed", "the most room of 1 eligible"},
		{"most free share of maxTenants", std, []candidate{db("a", tenants(5, 10)), db("b", tenants(3, 10))}, "b", "Placed", "3 of 10 tenants"},
		{"shares, not slots: 60 of 100 free beats 8 of 10", std, []candidate{db("big", tenants(40, 100)), db("small", tenants(2, 10))}, "small", "Placed", ""},
		{"the smaller of the two shares counts", std, []candidate{
			db("a", tenants(1, 10), bytesOf(90<<30, 100<<30)), // 90 % of tenants free, 10 % of bytes
			db("b", tenants(5, 10), bytesOf(10<<30, 100<<30)), // 50 %, 90 %
		}, "b", "Placed", ""},
		{"full by tenants", std, []candidate{db("a", tenants(10, 10)), db("b", tenants(9, 10))}, "b", "Placed", ""},
		{"full by bytes", std, []candidate{db("a", bytesOf(100<<30, 100<<30)), db("b", tenants(9, 10))}, "b", "Placed", ""},
		{"maxTenants 0 takes nothing", std, []candidate{db("a", tenants(0, 0))}, "", "NoDatabaseAvailable", "a: full (0 of 0 tenants)"},
		{"cordoned is skipped", std, []candidate{db("a", cordoned), db("b", tenants(9, 10))}, "b", "Placed", ""},
		{"unreachable is skipped", std, []candidate{db("a", down), db("b", tenants(9, 10))}, "b", "Placed", ""},
		{"not checked yet is skipped", std, []candidate{db("a", unchecked), db("b", tenants(9, 10))}, "b", "Placed", ""},
		{"tie: fewer tenants", std, []candidate{db("a", tenants(4, -1)), db("b", tenants(2, -1))}, "b", "Placed", ""},
		{"tie: name", std, []candidate{db("b", tenants(2, 10)), db("a", tenants(2, 10))}, "a", "Placed", ""},
		{"no bound is all room", std, []candidate{db("a", tenants(1000, -1)), db("b", tenants(1, 10))}, "a", "Placed", ""},
		{"selector leaves others out", std, []candidate{db("a", func(c *candidate) { c.labels = map[string]string{"tier": "gold"} }), db("b", tenants(9, 10))}, "b", "Placed", ""},
		{"databaseRef names one", placementRequest{ref: "b", what: "databaseRef b"}, []candidate{db("a"), db("b", tenants(9, 10))}, "b", "Placed", ""},
		{"databaseRef honours cordon", placementRequest{ref: "a", what: "databaseRef a"}, []candidate{db("a", cordoned), db("b")}, "", "NoDatabaseAvailable", "a: cordoned"},
		{"databaseRef of a database that does not exist", placementRequest{ref: "x", what: "databaseRef x"}, []candidate{db("a")}, "", "NoDatabaseAvailable", "no MemoryDatabase matches databaseRef x"},
		{"no match", bySelector("tier=gold"), []candidate{db("a")}, "", "NoDatabaseAvailable", "no MemoryDatabase matches databaseSelector tier=gold"},
		{"all full or cordoned: a human must act", std, []candidate{db("a", tenants(3, 3)), db("b", cordoned)}, "", "NoDatabaseAvailable", "a: full (3 of 3 tenants); b: cordoned"},
		{"the only room is unreachable: wait", std, []candidate{db("a", tenants(3, 3)), db("b", down)}, "", "WaitingForDatabase", "b: unreachable"},
		{"not checked yet: wait", std, []candidate{db("a", unchecked)}, "", "WaitingForDatabase", "a: not checked yet"},
		{"no databases at all", std, nil, "", "NoDatabaseAvailable", "no MemoryDatabase matches"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := place(c.req, c.dbs)
			if got.database != c.want || got.reason != c.reason || !strings.Contains(got.message, c.msg) {
				t.Errorf("place = %+v\nwant database %q, reason %s, message containing %q", got, c.want, c.reason, c.msg)
			}
		})
	}
}

// TestPlaceAdmission is the table of spec.allowedNamespaces in placement:
// a database that does not admit the runtime's namespace is ineligible
// whatever its room, by selector and by name, and the message says which
// database refuses which namespace and why, and nothing else of it.
func TestPlaceAdmission(t *testing.T) {
	admits := func(s string) func(*candidate) {
		return func(c *candidate) { c.admits = must(labels.Parse(s)) }
	}
	closed := func(c *candidate) {
		c.admits, c.refused = nil, "spec.allowedNamespaces is not set: it admits no namespace"
	}
	teamA := func(r placementRequest) placementRequest {
		r.namespace, r.nsLabels = "team-a", labels.Set{"team": "a", "kubernetes.io/metadata.name": "team-a"}
		return r
	}
	std, ref := teamA(bySelector("tier=std")), func(name string) placementRequest {
		return teamA(placementRequest{ref: name, what: "databaseRef " + name})
	}
	unread := std
	unread.nsUnread = "the namespace's labels are not read: 70 labels"
	cases := []struct {
		name   string
		req    placementRequest
		dbs    []candidate
		want   string
		reason string
		msg    string
	}{
		{"{} admits every namespace", std, []candidate{db("a")}, "a", "Placed", ""},
		{"the selector matches the namespace", std, []candidate{db("a", admits("team=a"))}, "a", "Placed", ""},
		{"by name", std, []candidate{db("a", admits("kubernetes.io/metadata.name in (team-a,team-c)"))}, "a", "Placed", ""},
		{"more room elsewhere, but not admitted there", std, []candidate{db("a", tenants(9, 10), admits("team=a")), db("b", admits("team=b"))}, "a", "Placed", "the most room of 1 eligible"},
		{"absent admits no namespace", std, []candidate{db("a", closed)}, "", "NamespaceNotAllowed",
			"a: does not admit namespace team-a (spec.allowedNamespaces is not set: it admits no namespace); a MemoryDatabase admits a namespace in its spec.allowedNamespaces"},
		{"databaseRef to a database of another team", ref("b"), []candidate{db("a"), db("b", admits("team=b"))}, "", "NamespaceNotAllowed",
			`(databaseRef b): b: does not admit namespace team-a (its spec.allowedNamespaces does not match the namespace's labels)`},
		{"NotIn excludes", ref("a"), []candidate{db("a", admits("team notin (a)"))}, "", "NamespaceNotAllowed", "does not admit namespace team-a"},
		{"a refused database's state is not told", ref("b"), []candidate{db("b", admits("team=b"), tenants(3, 3), func(c *candidate) { c.reach = metav1.ConditionFalse })}, "", "NamespaceNotAllowed", "b: does not admit"},
		{"refused and full: a human must act", std, []candidate{db("a", tenants(3, 3)), db("b", closed)}, "", "NoDatabaseAvailable", "a: full (3 of 3 tenants); b: does not admit namespace team-a"},
		{"refused and unreachable: wait", std, []candidate{db("a", func(c *candidate) { c.reach = metav1.ConditionFalse }), db("b", closed)}, "", "WaitingForDatabase", "a: unreachable; b: does not admit"},
		{"labels over the bounds: no database admits", unread, []candidate{db("a"), db("b", admits("team notin (x)"))}, "", "NamespaceNotAllowed", "a: does not admit namespace team-a (the namespace's labels are not read: 70 labels)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := place(c.req, c.dbs)
			if got.database != c.want || got.reason != c.reason || !strings.Contains(got.message, c.msg) {
				t.Errorf("place = %+v\nwant database %q, reason %s, message containing %q", got, c.want, c.reason, c.msg)
			}
			if c.name == "a refused database's state is not told" && (strings.Contains(got.message, "full") || strings.Contains(got.message, "unreachable")) {
				t.Errorf("the message tells another team's database's state: %s", got.message)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPlaceFillsInProportion: placing one tenant after another fills two
// databases in proportion to their capacities, to the last slot of each,
// and then refuses.
func TestPlaceFillsInProportion(t *testing.T) {
	dbs := []candidate{db("a", tenants(0, 6)), db("b", tenants(0, 4))}
	counts := map[string]int{}
	for i := range 10 {
		got := place(bySelector("tier=std"), dbs)
		if got.database == "" {
			t.Fatalf("tenant %d not placed: %s", i, got.message)
		}
		counts[got.database]++
		for j := range dbs {
			if dbs[j].name == got.database {
				dbs[j].tenants++
			}
		}
	}
	if counts["a"] != 6 || counts["b"] != 4 {
		t.Errorf("placed %v, want a:6 b:4", counts)
	}
	if got := place(bySelector("tier=std"), dbs); got.reason != memoryv1alpha1.ReasonNoDatabaseAvailable {
		t.Errorf("the 11th tenant: %+v", got)
	}
}

// TestPlacerLastSlot: many runtimes placed at once, each seeing a cache in
// which none of the others' placements has arrived yet, never take more
// slots than the databases have: the placer counts its own decisions
// until the cache shows them.
func TestPlacerLastSlot(t *testing.T) {
	dbs := []memoryv1alpha1.MemoryDatabase{testDatabase("a", 2), testDatabase("b", 1)}
	var stale []memoryv1alpha1.MemoryRuntime // the cache: 8 runtimes, none placed yet
	for i := range 8 {
		rt := memoryv1alpha1.MemoryRuntime{}
		rt.UID = types.UID(fmt.Sprintf("uid-%d", i))
		stale = append(stale, rt)
	}
	p := newPlacer()
	var mu sync.Mutex
	placed := map[string]int{}
	var wg sync.WaitGroup
	for i := range stale {
		wg.Go(func() {
			got := p.decide(stale[i].UID, bySelector("tier=std"), dbs, stale)
			mu.Lock()
			defer mu.Unlock()
			placed[got.database]++
		})
	}
	wg.Wait()
	if placed["a"] != 2 || placed["b"] != 1 || placed[""] != 5 {
		t.Errorf("placements %v, want a:2 b:1 and 5 refused", placed)
	}

	// Once the cache shows the placements, the reservations are dropped
	// and the count comes from the status alone; a runtime that is gone
	// frees its slot.
	var shown []memoryv1alpha1.MemoryRuntime
	for uid, name := range p.reserved {
		rt := memoryv1alpha1.MemoryRuntime{}
		rt.UID = uid
		rt.Status.Database = &memoryv1alpha1.RuntimeDatabase{Name: name}
		if name == "b" {
			continue // deleted
		}
		shown = append(shown, rt)
	}
	got := p.decide("uid-new", bySelector("tier=std"), dbs, shown)
	if got.database != "b" {
		t.Errorf("after b's tenant went away: %+v", got)
	}
	p.release("uid-new")
	if len(p.reserved) != 0 {
		t.Errorf("reservations left: %v", p.reserved)
	}
}

// testDatabase is a reachable MemoryDatabase tier=std with maxTenants.
func testDatabase(name string, maxTenants int32) memoryv1alpha1.MemoryDatabase {
	d := memoryv1alpha1.MemoryDatabase{}
	d.Name, d.Generation, d.Labels = name, 1, map[string]string{"tier": "std"}
	d.Spec.Capacity.MaxTenants = ptr.To(maxTenants)
	d.Spec.AllowedNamespaces = &metav1.LabelSelector{}
	d.SetCondition(memoryv1alpha1.ConditionReachable, true, memoryv1alpha1.ReasonConnected, "ok")
	return d
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1Ki", 1536: "1.5Ki", 200 << 30: "200Gi", 7_456_423: "7.1Mi"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	// The same spelling as the quantities users write.
	if q := resource.MustParse("200Gi"); formatBytes(q.Value()) != q.String() {
		t.Errorf("200Gi is written %s", formatBytes(q.Value()))
	}
}

// TestPlacerSkipsADatabaseKeptWithoutSpec: a MemoryDatabase the cache keeps
// without its spec (too large to read) takes no new tenant, as if cordoned:
// its spec-less copy reads as uncordoned with no capacity bound (the
// sixteenth review of issue 26, LOW 3).
func TestPlacerSkipsADatabaseKeptWithoutSpec(t *testing.T) {
	whole := testDatabase("a", 100)
	unread := specOverBoundCopy(&whole).(*memoryv1alpha1.MemoryDatabase)
	dbs := []memoryv1alpha1.MemoryDatabase{*unread, testDatabase("b", 1)}
	p := newPlacer()
	for i := range 3 {
		got := p.decide(types.UID(fmt.Sprintf("uid-%d", i)), bySelector("tier=std"), dbs, nil)
		if got.database == "a" {
			t.Fatalf("runtime %d placed on a database kept without its spec", i)
		}
	}
	if got := p.decide("by-ref", placementRequest{ref: "a", what: "databaseRef a"}, dbs, nil); got.database != "" {
		t.Errorf("databaseRef to a database kept without its spec placed there: %+v", got)
	}
}
