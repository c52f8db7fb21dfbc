package controller

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/engram-dev/engram/internal/tenant"
)

// Options configure the operator. The `manager` command fills them from its
// flags; tests fill them directly.
type Options struct {
	// OperatorNamespace holds the clusterConnection Secrets (labelled
	// memory.engram.dev/connection=<name>). Empty: clusterConnection cannot resolve.
	OperatorNamespace string
	// WatchNamespaces limits the operator to these namespaces; empty = all.
	WatchNamespaces []string
	// ServiceImage is the image of the memory service and the jobs when a
	// runtime does not set spec.service.image (normally the operator's own).
	ServiceImage string
	// GrantCheckInterval is how often a Ready runtime's schema, roles and
	// grants are verified (and repaired) in PostgreSQL.
	GrantCheckInterval time.Duration
	// TextSearchMinInterval is how long after switching a tenant's text
	// search configuration the operator starts the next switch
	// (textsearch_pace.go); a negative value: no minimum.
	TextSearchMinInterval time.Duration
	// DatabaseTimeout bounds one provisioning, rotation or drop call.
	DatabaseTimeout time.Duration
	// ConnectTimeout bounds connecting to PostgreSQL.
	ConnectTimeout time.Duration
	// LockTimeout is the lock_timeout of every admin session: how long a
	// statement of the operator waits for a lock (DDL behind a busy table,
	// say) before it fails and the reconcile retries. DatabaseTimeout is
	// also each session's statement_timeout.
	LockTimeout time.Duration
	// MigrationTimeout bounds a provisioning call that may migrate the
	// schema, and each CREATE INDEX CONCURRENTLY of a migration (which may
	// take minutes on a large tenant). Every other statement is bounded by
	// DatabaseTimeout (statement_timeout) and LockTimeout.
	MigrationTimeout time.Duration
	// TenantServerTimeout bounds a whole provisioning or move pass on a
	// server named by a connectionSecretRef of the runtime's own namespace,
	// migrations and index builds included, in place of MigrationTimeout.
	// Such a server may be one the tenant runs, which need not honour
	// statement_timeout: it can log the operator in and never answer, and
	// the pass would hold a reconcile worker for the whole bound (issue
	// 26's sixth review, HIGH 2). Platform connections (clusterConnection,
	// MemoryDatabase) keep MigrationTimeout.
	TenantServerTimeout time.Duration
	// MoveProgressInterval is the least time between two status writes of
	// a running move's progress (move-to-worker). Not a flag: the envtest
	// suite shortens it so that a move of seconds reports progress.
	MoveProgressInterval time.Duration
	// MoveFreezeTimeout bounds how long a move to another server keeps the
	// tenant's writes frozen (--move-freeze-timeout): past it the freeze is
	// lifted and the move catches up again (MoveFreezeTooLong).
	MoveFreezeTimeout time.Duration
	// MoveSlice is how long one reconcile works on a move to another server
	// before it returns (and comes back at once): other runtimes get the
	// worker in between. Not a flag.
	MoveSlice time.Duration
	// MetricsNamespaces selects the namespaces whose pods may reach the
	// memory services' metrics port (where Prometheus runs): the runtimes'
	// NetworkPolicies admit it from there only. Nil: DefaultMetricsNamespaces.
	MetricsNamespaces *metav1.LabelSelector
	// TenantBlockerMaxAge is how long a transaction of another tenant's
	// login role may stay open while a provisioning statement (a CREATE
	// INDEX CONCURRENTLY of a migration, say) waits for it: the operator
	// then ends that session, with a Warning event on both runtimes
	// (tenant.BlockerPolicy).
	TenantBlockerMaxAge time.Duration
	// TenantReaperInterval is how often the operator looks, on every
	// database it has a connection to, for sessions of tenants' login roles
	// whose transaction has held back the database's cleanup (VACUUM) for
	// longer than TenantBlockerMaxAge, and ends them (transactionReaper).
	// Zero means DefaultTenantReaperInterval; negative turns it off.
	TenantReaperInterval time.Duration
	// TenantLockWatchInterval is how often the lock watchdog looks, on
	// every database it has a connection to, for sessions of tenants'
	// login roles holding more than TenantLockThreshold locks in the
	// server's shared lock table, and ends them (lockWatchdog). Zero means
	// DefaultTenantLockWatchInterval; negative turns it off.
	TenantLockWatchInterval time.Duration
	// TenantLockThreshold: a tenant session holding more locks is ended.
	// Zero means twice the server's max_locks_per_transaction.
	TenantLockThreshold int
	// TenantLockTableShare is the percentage of the server's lock table
	// the sessions of one namespace's login roles may hold together; over
	// it the watchdog ends and quarantines them all. Zero means
	// tenant.DefaultLockTableShare.
	TenantLockTableShare int
	// TenantLockQuarantine is how long the watchdog first refuses the
	// logins of a role it ended (CONNECTION LIMIT 0), doubling on each
	// repeat up to tenant.DefaultMaxQuarantine. Zero means
	// tenant.DefaultQuarantine.
	TenantLockQuarantine time.Duration
	// TenantConnectionShare is the percentage of the server's connection
	// slots the login roles of one namespace may hold together (each one's
	// CONNECTION LIMIT is its part). Zero means
	// DefaultTenantConnectionShare; negative sets no limit.
	TenantConnectionShare int
	// TenantTempFileLimit is the temp_file_limit set on every tenant login
	// role (a PostgreSQL size; "-1" sets none). Empty means
	// tenant.DefaultTempFileLimit.
	TenantTempFileLimit string
	// DatabaseCheckInterval is how often each MemoryDatabase is checked
	// (reachable, version, extensions, size), plus a jitter of up to a
	// tenth of it. A database that goes down is noticed within it, and its
	// tenants report it then.
	DatabaseCheckInterval time.Duration
	// PoolMaxConns is the size of each admin connection pool.
	PoolMaxConns int32
	// Concurrency is the number of objects of each kind reconciled at once.
	RuntimeConcurrency, PolicyConcurrency, RetentionJobConcurrency, DatabaseConcurrency int
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff of a
	// failing reconcile (database down, API errors).
	RetryBaseDelay, RetryMaxDelay time.Duration
	// NotOwnedRetry is how often the operator looks again at an object it
	// refused to overwrite (reason ObjectNotOwned). Such an object carries
	// no Engram label, so the operator's caches see no event when it is
	// deleted: only this timer notices.
	NotOwnedRetry time.Duration
	// FailAfter is a test seam, nil in production. When set, the
	// MemoryRuntime reconciler calls it with the runtime's key after each
	// provisioning step: the database steps of tenant.Spec.FailAfter ("role
	// created", "schema created", "migrated", "granted") and its own
	// ("credentials secret written", "deployment applied"). An error stands
	// for the operator dying right there: the reconcile ends at once,
	// writes no status and forgets what it remembered about the runtime,
	// and the next reconcile starts as a freshly started operator would.
	FailAfter func(runtime types.NamespacedName, step string) error
	// ReplayMigrations is a test seam, nil in production: a runtime for
	// which it returns true has a new schema built by replaying every
	// migration, as an upgrade does (tenant.Spec.Replay), instead of in one
	// step. The scenarios of the blocker watch use it: a new tenant's
	// install builds no index concurrently and waits for no snapshot.
	ReplayMigrations func(runtime types.NamespacedName) bool
}

// Defaults of Options.
const (
	DefaultGrantCheckInterval      = 10 * time.Minute
	DefaultDatabaseTimeout         = 60 * time.Second
	DefaultConnectTimeout          = 10 * time.Second
	DefaultLockTimeout             = 5 * time.Second
	DefaultMigrationTimeout        = 30 * time.Minute
	DefaultTenantServerTimeout     = 60 * time.Second
	DefaultTenantBlockerMaxAge     = tenant.DefaultBlockerMaxAge
	DefaultTenantReaperInterval    = tenant.DefaultReaperInterval
	DefaultTenantLockWatchInterval = tenant.DefaultLockWatchInterval
	DefaultTenantConnectionShare   = tenant.DefaultConnectionShare
	DefaultPoolMaxConns            = 4
	DefaultDatabaseCheckInterval   = time.Minute
	DefaultRetryBaseDelay          = 500 * time.Millisecond
	DefaultRetryMaxDelay           = 5 * time.Minute
	DefaultNotOwnedRetry           = 30 * time.Second
	DefaultMoveProgressInterval    = 10 * time.Second
	DefaultMoveFreezeTimeout       = 60 * time.Second
	DefaultMoveSlice               = 20 * time.Second
)

// DefaultMetricsNamespaces is the selector of --service-metrics-namespaces:
// the namespace named monitoring (the label every namespace has).
const DefaultMetricsNamespaces = "kubernetes.io/metadata.name=monitoring"

// ParseMetricsNamespaces reads a label selector of namespaces (kubectl's
// syntax: "kubernetes.io/metadata.name=monitoring", "team in (obs,sre)").
// An empty one would select every namespace, so it is refused.
func ParseMetricsNamespaces(s string) (*metav1.LabelSelector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("the selector is empty, which would admit every namespace")
	}
	sel, err := metav1.ParseToLabelSelector(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a label selector: %w", s, err)
	}
	return sel, nil
}

// defaultIfUnset sets an option left at zero (or set negative) to its
// default; options where a negative value means "off" are not filled this
// way.
func defaultIfUnset[T ~int | ~int32 | ~int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// withDefaults fills unset options.
func (o Options) withDefaults() Options {
	if o.TenantTempFileLimit == "" {
		o.TenantTempFileLimit = tenant.DefaultTempFileLimit
	}
	defaultIfUnset(&o.GrantCheckInterval, DefaultGrantCheckInterval)
	if o.TextSearchMinInterval == 0 {
		o.TextSearchMinInterval = DefaultTextSearchMinInterval
	}
	defaultIfUnset(&o.DatabaseTimeout, DefaultDatabaseTimeout)
	defaultIfUnset(&o.ConnectTimeout, DefaultConnectTimeout)
	defaultIfUnset(&o.MigrationTimeout, DefaultMigrationTimeout)
	defaultIfUnset(&o.TenantServerTimeout, DefaultTenantServerTimeout)
	defaultIfUnset(&o.MoveProgressInterval, DefaultMoveProgressInterval)
	defaultIfUnset(&o.MoveFreezeTimeout, DefaultMoveFreezeTimeout)
	defaultIfUnset(&o.MoveSlice, DefaultMoveSlice)
	defaultIfUnset(&o.TenantBlockerMaxAge, DefaultTenantBlockerMaxAge)
	if o.TenantReaperInterval == 0 {
		o.TenantReaperInterval = DefaultTenantReaperInterval
	}
	if o.TenantLockWatchInterval == 0 {
		o.TenantLockWatchInterval = DefaultTenantLockWatchInterval
	}
	defaultIfUnset(&o.LockTimeout, DefaultLockTimeout)
	defaultIfUnset(&o.PoolMaxConns, DefaultPoolMaxConns)
	defaultIfUnset(&o.RuntimeConcurrency, 4)
	defaultIfUnset(&o.PolicyConcurrency, 1)
	defaultIfUnset(&o.RetentionJobConcurrency, 2)
	defaultIfUnset(&o.DatabaseConcurrency, 2)
	defaultIfUnset(&o.DatabaseCheckInterval, DefaultDatabaseCheckInterval)
	defaultIfUnset(&o.RetryBaseDelay, DefaultRetryBaseDelay)
	defaultIfUnset(&o.RetryMaxDelay, DefaultRetryMaxDelay)
	defaultIfUnset(&o.NotOwnedRetry, DefaultNotOwnedRetry)
	if o.MetricsNamespaces == nil {
		o.MetricsNamespaces, _ = ParseMetricsNamespaces(DefaultMetricsNamespaces)
	}
	return o
}

// ParseNamespaces splits a comma-separated namespace list, dropping blanks
// and repeats.
func ParseNamespaces(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for ns := range strings.SplitSeq(s, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" || seen[ns] {
			continue
		}
		if len(ns) > 63 || strings.ContainsAny(ns, " /:") {
			return nil, fmt.Errorf("%q is not a namespace name", ns)
		}
		seen[ns] = true
		out = append(out, ns)
	}
	return out, nil
}
