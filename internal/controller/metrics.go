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
	provisionChanges = registeredCounter("engram_operator_provision_changes_total",
		"Changes made while provisioning or repairing tenants (schemas, roles, migrations, grants). Growth on Ready tenants means something keeps undoing them.")
	passwordRotations = registeredCounterVec("engram_operator_password_rotations_total",
		"Login password rotations, by reason (requested, secret_missing, secret_edited, moved).",
		"reason")
	reclaims = registeredCounterVec("engram_operator_reclaims_total",
		"Deleted MemoryRuntimes, by what happened to the tenant (dropped, retained, skipped).",
		"outcome")
	tenantBlockers = registeredCounterVec("engram_operator_tenant_blockers_total",
		"Sessions that made a provisioning statement wait too long, by outcome (ended: another tenant's session the operator ended; kept: one it may not or could not end).",
		"outcome")
	oldTransactions = registeredCounterVec("engram_operator_old_tenant_transactions_total",
		"Sessions of tenants' login roles whose transaction held back the cleanup of their database for longer than --tenant-blocker-max-age, by outcome (ended; failed: the operator may not or could not end it).",
		"outcome")
	reaperLooks = registeredCounterVec("engram_operator_transaction_reaper_looks_total",
		"Looks of the transaction reaper at one database, by result (ok; error: the database could not be asked).",
		"result")
	lockHogs = registeredCounterVec("engram_operator_tenant_lock_hogs_total",
		"Sessions of tenants' login roles that held more locks in the server's shared lock table than --tenant-lock-threshold, by outcome (ended; failed: the operator may not or could not end it).",
		"outcome")
	lockWatchLooks = registeredCounterVec("engram_operator_lock_watchdog_looks_total",
		"Looks of the lock watchdog at one database, by result (ok; error: the database could not be asked).",
		"result")
	runNowJobs = registeredCounter("engram_operator_run_now_jobs_total",
		"Jobs started by the run-now annotation of RetentionJobs.")
)

func init() { metrics.Registry.MustRegister(provisionSeconds) }

// registeredCounterVec is a counter of the operator with labels, registered
// on controller-runtime's registry as it is declared, so that no metric can
// be declared and forgotten in the registration list.
func registeredCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	metrics.Registry.MustRegister(c)
	return c
}

// registeredCounter is registeredCounterVec without labels.
func registeredCounter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	metrics.Registry.MustRegister(c)
	return c
}
