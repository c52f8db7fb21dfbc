package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// Placement: where a new tenant of a MemoryRuntime with databaseRef or
// databaseSelector goes. The decision is the pure function place, of the
// databases as their status shows them and of the tenants already placed;
// the phase that calls it (memoryruntime_placement.go) records the answer
// once in status.database, and nothing ever changes it afterwards.

// candidate is one MemoryDatabase as placement sees it.
type candidate struct {
	name     string
	labels   map[string]string
	reach    metav1.ConditionStatus // the last check: True, False, or Unknown (not checked yet)
	cordoned bool
	// tenants placed there, counting placements decided but not yet seen
	// in the cache (placer.usage).
	tenants    int64
	maxTenants int64 // -1: no bound
	bytes      int64 // status.bytesUsed
	maxBytes   int64 // -1: no bound
	// admits selects the namespaces whose tenants may be placed here
	// (spec.allowedNamespaces); nil admits none, and refused says why.
	admits  labels.Selector
	refused string
}

// placementRequest is what the runtime asks for: one database by name, or
// a selector.
type placementRequest struct {
	ref      string          // spec.database.databaseRef.name, or ""
	selector labels.Selector // spec.database.databaseSelector when ref is ""
	what     string          // how the request reads in a message
	// The runtime's namespace and its labels, as the operator's cache
	// keeps them (namespace_admission.go). nsUnread, when set, says why the
	// labels cannot be matched (over the cache's bounds): no database
	// admits the namespace then.
	namespace string
	nsLabels  labels.Set
	nsUnread  string
}

// placement is the decision: a database, or why none.
type placement struct {
	database string
	// reason is ReasonPlaced, ReasonWaitingForDatabase (something that
	// may change by itself: a database not checked yet or unreachable) or
	// ReasonNoDatabaseAvailable (a human has to act: no match, or every
	// match cordoned or full).
	reason  string
	message string
}

// room is a database's free share: the smaller of the free shares of its
// two capacities (1 for a capacity without bound). Comparing shares rather
// than free slots fills databases in proportion to their capacities: a
// database with maxTenants 100 takes ten tenants for every one of a
// database with maxTenants 10.
func (c candidate) room() float64 {
	share := 1.0
	if c.maxTenants >= 0 {
		share = min(share, freeShare(c.tenants, c.maxTenants))
	}
	if c.maxBytes >= 0 {
		share = min(share, freeShare(c.bytes, c.maxBytes))
	}
	return share
}

func freeShare(used, bound int64) float64 {
	if bound <= 0 || used >= bound {
		return 0
	}
	return float64(bound-used) / float64(bound)
}

// refusal says why the database does not admit the request's namespace,
// or "" when it does.
func (c candidate) refusal(req placementRequest) string {
	why := ""
	switch {
	case c.admits == nil:
		why = c.refused
	case req.nsUnread != "":
		why = req.nsUnread
	case !c.admits.Matches(req.nsLabels):
		// The selector itself is not said: it may name the namespaces of
		// other teams the database admits.
		why = "its spec.allowedNamespaces does not match the namespace's labels"
	default:
		return ""
	}
	return fmt.Sprintf("does not admit namespace %s (%s)", req.namespace, why)
}

// full says why the database cannot take one more tenant, or "".
func (c candidate) full() string {
	switch {
	case c.maxTenants >= 0 && c.tenants >= c.maxTenants:
		return fmt.Sprintf("full (%d of %d tenants)", c.tenants, c.maxTenants)
	case c.maxBytes >= 0 && c.bytes >= c.maxBytes:
		return fmt.Sprintf("full (%s of %s used)", formatBytes(c.bytes), formatBytes(c.maxBytes))
	}
	return ""
}

// place picks the database for a new tenant: among the databases the
// request names or selects, those that are reachable, not cordoned and
// under both capacities are eligible; the one with the most room wins,
// ties going to the one with fewer tenants, then to the name that sorts
// first. A database that does not admit the runtime's namespace is not
// eligible, whatever its state, and the message says only that of it (a
// team learns nothing of another team's database). Without an eligible
// database it says why, per database.
func place(req placementRequest, dbs []candidate) placement {
	var matched []candidate
	for _, c := range dbs {
		if req.ref != "" && c.name == req.ref || req.ref == "" && req.selector != nil && req.selector.Matches(labels.Set(c.labels)) {
			matched = append(matched, c)
		}
	}
	if len(matched) == 0 {
		return placement{reason: memoryv1alpha1.ReasonNoDatabaseAvailable, message: "no MemoryDatabase matches " + req.what}
	}
	slices.SortFunc(matched, func(a, b candidate) int { return strings.Compare(a.name, b.name) })
	var eligible []candidate
	var why []string
	waiting, refused := false, 0
	for _, c := range matched {
		switch {
		case c.refusal(req) != "":
			why = append(why, c.name+": "+c.refusal(req))
			refused++
		case c.cordoned:
			why = append(why, c.name+": cordoned")
		case c.full() != "":
			why = append(why, c.name+": "+c.full())
		case c.reach == metav1.ConditionFalse:
			why = append(why, c.name+": unreachable")
			waiting = true
		case c.reach != metav1.ConditionTrue:
			why = append(why, c.name+": not checked yet")
			waiting = true
		default:
			eligible = append(eligible, c)
		}
	}
	if len(eligible) == 0 {
		reason := memoryv1alpha1.ReasonNoDatabaseAvailable
		hint := ""
		switch {
		case waiting:
			reason = memoryv1alpha1.ReasonWaitingForDatabase
		case refused == len(matched):
			reason = memoryv1alpha1.ReasonNamespaceNotAllowed
			hint = "; a MemoryDatabase admits a namespace in its spec.allowedNamespaces, which the platform team sets"
		}
		return placement{reason: reason, message: fmt.Sprintf("no MemoryDatabase can take the tenant (%s): %s%s", req.what, strings.Join(why, "; "), hint)}
	}
	best := slices.MinFunc(eligible, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.room(), a.room()), cmp.Compare(a.tenants, b.tenants), strings.Compare(a.name, b.name))
	})
	return placement{database: best.name, reason: memoryv1alpha1.ReasonPlaced, message: placedMessage(req, best, len(eligible))}
}

func placedMessage(req placementRequest, c candidate, eligible int) string {
	tenants := fmt.Sprintf("%d tenants", c.tenants)
	if c.maxTenants >= 0 {
		tenants = fmt.Sprintf("%d of %d tenants", c.tenants, c.maxTenants)
	}
	used := formatBytes(c.bytes)
	if c.maxBytes >= 0 {
		used += " of " + formatBytes(c.maxBytes)
	}
	return fmt.Sprintf("placed on MemoryDatabase %s (%s): the most room of %d eligible (%s, %s used before this tenant)",
		c.name, req.what, eligible, tenants, used)
}

// formatBytes writes a size in binary units, as resource.Quantity would.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v), "0"), ".") + units[i]
}
