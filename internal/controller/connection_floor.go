package controller

import memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"

// What a runtime's own processes open with its login role, for the floor
// of its CONNECTION LIMIT (tenant.ConnectionPolicy.Floor).
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

// connectionFloor is the least CONNECTION LIMIT the runtime's login role
// may get: twice its replicas (the surge of a rolling update, an HPA above
// spec.replicas) times the service's pool, plus the jobs and a margin. A
// correct service never meets "too many connections for role"; the share
// of the server (--tenant-connection-share) is usually far above it.
func connectionFloor(rt *memoryv1alpha1.MemoryRuntime) int {
	return 2*int(max(rt.Replicas(), 1))*servicePoolConns + jobConns + connectionMargin
}
