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
	oldTransactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engram_operator_old_tenant_transactions_total",
		Help: "Sessions of tenants' login roles whose transaction held back the cleanup of their database for longer than --tenant-blocker-max-age, by outcome (ended; failed: the operator may not or could not end it).",
	}, []string{"outcome"})
	reaperLooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engram_operator_transaction_reaper_looks_total",
		Help: "Looks of the transaction reaper at one database, by result (ok; error: the database could not be asked).",
	}, []string{"result"})
	lockHogs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engram_operator_tenant_lock_hogs_total",
		Help: "Sessions of tenants' login roles that held more locks in the server's shared lock table than --tenant-lock-threshold, by outcome (ended; failed: the operator may not or could not end it).",
	}, []string{"outcome"})
	lockWatchLooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engram_operator_lock_watchdog_looks_total",
		Help: "Looks of the lock watchdog at one database, by result (ok; error: the database could not be asked).",
	}, []string{"result"})
	runNowJobs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "engram_operator_run_now_jobs_total",
		Help: "Jobs started by the run-now annotation of RetentionJobs.",
	})
)

func init() {
	metrics.Registry.MustRegister(provisionSeconds, provisionChanges, passwordRotations, reclaims, runNowJobs, tenantBlockers, oldTransactions, reaperLooks, lockHogs, lockWatchLooks)
}
