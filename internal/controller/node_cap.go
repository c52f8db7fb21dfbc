package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Caps on the tenant-run databases the node runners (the lock watchdog
// and the transaction reaper) follow. A tenant's connectionSecretRef may
// name a server the tenant runs, and each database or user of it that a
// provisioning pass proves is a node: a connection of each runner, kept
// for as long as the operator runs, holding what the server last said
// (tenant.BoundTenantServer's bounds, and the watchdog's roles, at most
// tenant.MaxTenantWatchedRoles). Nothing capped the nodes, so one
// namespace with many such Secrets could fill the operator's memory
// (issue 26's eighth review, HIGH 1 c). With these caps a tenant-run node
// keeps at most about 2.75 MiB, all of them together 44 MiB
// (docs/security.md, "What a tenant-run server can make the operator
// keep").
//
// The platform team's databases (MemoryDatabases, clusterConnections) are
// never counted nor left out: a tenant cannot crowd them out.
const (
	// MaxTenantNodesPerNamespace is the most tenant-run databases of one
	// namespace the runners follow.
	MaxTenantNodesPerNamespace = 4
	// MaxTenantNodes is the most tenant-run databases the runners follow,
	// all namespaces together.
	MaxTenantNodes = 16
)

// followedDatabases splits the tenant-run databases of dbs into those the
// runners follow and those over a cap, each of the latter with why. The
// platform's are always followed. Tenants' are taken round-robin by
// namespace (the first of each namespace, then the second, ...), in the
// order of their keys, so one namespace's many databases never take the
// place of another's first, and the choice is the same at every sync:
// not rotated, since a node left out is released with what its runners
// keep between looks (quarantines to lift, the reaper's clocks). Past
// MaxTenantNodes namespaces, those whose names sort last are left out
// (docs/security.md; issue 26's tenth review, L1).
func followedDatabases(dbs map[string]dbTarget, perNamespace, total int) (follow map[string]bool, over map[string]string) {
	follow, over = map[string]bool{}, map[string]string{}
	byNS := map[string][]string{}
	for _, key := range slices.Sorted(maps.Keys(dbs)) {
		t := dbs[key]
		if t.platform {
			follow[key] = true
			continue
		}
		for _, ns := range tenantNamespaces(t.ids) {
			byNS[ns] = append(byNS[ns], key)
		}
	}
	namespaces := slices.Sorted(maps.Keys(byNS))
	taken, chosen := map[string]int{}, 0
	for progress := true; progress && chosen < total; {
		progress = false
		for _, ns := range namespaces {
			if taken[ns] >= perNamespace || chosen >= total {
				continue
			}
			if i := slices.IndexFunc(byNS[ns], func(k string) bool { return !follow[k] }); i >= 0 {
				follow[byNS[ns][i]] = true
				taken[ns]++
				chosen++
				progress = true
			}
		}
	}
	for key, t := range dbs {
		if !follow[key] {
			over[key] = overCapReason(tenantNamespaces(t.ids), taken, perNamespace, total)
		}
	}
	return follow, over
}

// overCapReason says why a database of namespaces nss is not followed:
// every one of them is at the per-namespace cap, or the total is reached.
func overCapReason(nss []string, taken map[string]int, perNamespace, total int) string {
	if slices.ContainsFunc(nss, func(ns string) bool { return taken[ns] < perNamespace }) {
		return fmt.Sprintf("the operator follows at most %d databases on servers that tenants run, all namespaces together (MaxTenantNodes)", total)
	}
	return fmt.Sprintf("namespace %s has more than %d databases on servers of its own (connectionSecretRef), the most the operator follows per namespace (MaxTenantNodesPerNamespace)",
		strings.Join(nss, ", "), perNamespace)
}

// tenantNamespaces lists the namespaces of the tenants' connection ids
// ("secret/<namespace>/<name>/<key>"), sorted and each once.
func tenantNamespaces(ids []string) []string {
	var out []string
	for _, id := range ids {
		if rest, ok := strings.CutPrefix(id, "secret/"); ok {
			ns, _, _ := strings.Cut(rest, "/")
			out = append(out, ns)
		}
	}
	if len(out) == 0 {
		return []string{""} // not a Secret's: a group of its own
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// warnOverCap logs each tenant-run database the runner stops following
// (or never follows) because of a cap, once when it goes over, and
// forgets those back under it. Called with r.mu held.
func (r *nodeRunner) warnOverCap(over map[string]string) {
	for key := range r.overCap {
		if _, ok := over[key]; !ok {
			delete(r.overCap, key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(over)) {
		if r.overCap[key] {
			continue
		}
		r.overCap[key] = true
		r.log.Info("warning: a tenant-run database is not looked at", "database", key, "why", over[key])
	}
}
