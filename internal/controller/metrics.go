package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Engram's own operator metrics, served with controller-runtime's (reconcile
// counts, durations and errors per controller, work queue depth) on the
// manager's /metrics endpoint.
var (
	provisionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "engram_operator_provision_duration_seconds",
		Help:    "Time of one tenant provisioning or grant check in PostgreSQL, by result (ok, error).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10),
	}, []string{"result"})
	provisionChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "engram_operator_provision_changes_total",
		Help: "Changes made while provisioning or repairing tenants (schemas, roles, migrations, grants). Growth on Ready tenants means something keeps undoing them.",
	})
	passwordRotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engram_operator_password_rotations_total",
		Help: "Login password rotations, by reason (requested, secret_missing, secret_edited).",
	}, []string{"reason"})
	reclaims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engram_operator_reclaims_total",
		Help: "Deleted MemoryRuntimes, by what happened to the tenant (dropped, retained, skipped).",
	}, []string{"outcome"})
	tenantBlockers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engram_operator_tenant_blockers_total",
		Help: "Sessions that made a provisioning statement wait too long, by outcome (ended: another tenant's session the operator ended; kept: one it may not or could not end).",
	}, []string{"outcome"})
	runNowJobs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "engram_operator_run_now_jobs_total",
		Help: "Jobs started by the run-now annotation of RetentionJobs.",
	})
)

func init() {
	metrics.Registry.MustRegister(provisionSeconds, provisionChanges, passwordRotations, reclaims, runNowJobs, tenantBlockers)
}
