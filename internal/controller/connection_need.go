package controller

import memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"

// What a runtime's own processes open with its login role, for its need
// of connections (tenant.ConnectionPolicy.Need).
const (
	// servicePoolConns is the memory service's pool size (manager serve
	// --db-max-conns, whose default the Deployment keeps).
	servicePoolConns = 10
	// jobConns: the maintenance CronJobs (decay, expiry, purge,
	// compaction), two connections each (manager job --db-max-conns),
	// each possibly overlapping its previous run.
	jobConns = 4 * 2 * 2
	// connectionMargin: a team's own sessions with the credential, psql,
	// a pooler's health check.
	connectionMargin = 5
)

// connectionNeed is what the runtime's login role opens at most: twice its
// replicas (the surge of a rolling update, an HPA above spec.replicas)
// times the service's pool, plus the jobs and a margin. It never raises
// the limit (replicas is the tenant's to write): above the limit, the
// operator warns (ConnectionShareTooSmall).
func connectionNeed(rt *memoryv1alpha1.MemoryRuntime) int {
	return 2*int(max(rt.Replicas(), 1))*servicePoolConns + jobConns + connectionMargin
}
