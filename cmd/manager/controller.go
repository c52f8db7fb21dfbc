package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // RetentionJob time zones, also in images without /usr/share/zoneinfo

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/engram-dev/engram/internal/controller"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/workload"
)

// controllerFlags are the flags of `manager` (the operator).
type controllerFlags struct {
	leaderElect           bool
	metricsAddr           string
	probeAddr             string
	runtimeConcurrency    int
	policyConcurrency     int
	jobConcurrency        int
	dbConcurrency         int
	dbCheckInterval       time.Duration
	watchNamespaces       string
	operatorNamespace     string
	grantCheckInterval    time.Duration
	textSearchMinInterval time.Duration
	dbLockTimeout         time.Duration
	dbTimeout             time.Duration
	migrationTimeout      time.Duration
	tenantServerTimeout   time.Duration
	moveFreezeTimeout     time.Duration
	blockerMaxAge         time.Duration
	reaperInterval        time.Duration
	lockWatchInterval     time.Duration
	lockThreshold         int
	lockTableShare        int
	lockQuarantine        time.Duration
	connectionShare       int
	tempFileLimit         string
	serviceImage          string
	metricsNamespaces     string
	logLevel              string
	logFormat             string
}

func parseControllerFlags(args []string, stderr io.Writer) (*controllerFlags, error) {
	f := &controllerFlags{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect one active replica through a Lease in the operator namespace (enable when running more than one)")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; \"0\" turns it off")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	fs.IntVar(&f.runtimeConcurrency, "max-concurrent-reconciles-runtime", 4, "MemoryRuntimes reconciled at once")
	fs.IntVar(&f.policyConcurrency, "max-concurrent-reconciles-policy", 1, "MemoryPolicies reconciled at once")
	fs.IntVar(&f.jobConcurrency, "max-concurrent-reconciles-retentionjob", 2, "RetentionJobs reconciled at once")
	fs.IntVar(&f.dbConcurrency, "max-concurrent-reconciles-database", 2, "MemoryDatabases checked at once")
	fs.DurationVar(&f.dbCheckInterval, "database-check-interval", controller.DefaultDatabaseCheckInterval, "how often each MemoryDatabase is checked (reachable, version, extensions, size), plus up to a tenth as jitter")
	fs.StringVar(&f.watchNamespaces, "watch-namespaces", os.Getenv(naming.EnvWatchNamespaces), "comma-separated namespaces to manage; empty = all (env WATCH_NAMESPACES)")
	fs.StringVar(&f.operatorNamespace, "operator-namespace", os.Getenv(naming.EnvPodNamespace), "namespace of the operator: clusterConnection Secrets and the leader election Lease (env POD_NAMESPACE)")
	fs.DurationVar(&f.dbLockTimeout, "db-lock-timeout", controller.DefaultLockTimeout, "lock_timeout of every admin session: how long a provisioning statement waits for a lock before the reconcile retries")
	fs.DurationVar(&f.dbTimeout, "db-timeout", controller.DefaultDatabaseTimeout, "statement_timeout of every admin session, and the bound of one provisioning, rotation or drop")
	fs.DurationVar(&f.migrationTimeout, "migration-timeout", controller.DefaultMigrationTimeout, "bound of a provisioning that may migrate a schema, and of each CREATE INDEX CONCURRENTLY of a migration")
	fs.DurationVar(&f.tenantServerTimeout, "tenant-server-timeout", controller.DefaultTenantServerTimeout, "bound of a whole provisioning pass (migrations and index builds included) on a database server a runtime's connectionSecretRef names, in place of --migration-timeout: such a server may be the tenant's own and need not answer")
	fs.DurationVar(&f.moveFreezeTimeout, "move-freeze-timeout", controller.DefaultMoveFreezeTimeout, "longest time a move to another server (spec.database.onChange: Move) keeps the tenant's writes frozen for its last catch-up, verify and switch; past it writes resume and the move catches up again (event MoveFreezeTooLong)")
	fs.DurationVar(&f.blockerMaxAge, "tenant-blocker-max-age", controller.DefaultTenantBlockerMaxAge, "how long another tenant's open transaction may make a provisioning statement (a concurrent index build of a migration) wait before the operator ends its session")
	fs.DurationVar(&f.reaperInterval, "tenant-reaper-interval", controller.DefaultTenantReaperInterval, "how often the operator looks, on each database it manages, for tenant sessions whose transaction has held back the database's cleanup (VACUUM) for longer than --tenant-blocker-max-age, and ends them; 0 turns it off")
	fs.DurationVar(&f.lockWatchInterval, "tenant-lock-watch-interval", controller.DefaultTenantLockWatchInterval, "how often the operator looks, on each database it manages, for tenant sessions holding more than --tenant-lock-threshold locks in the server's shared lock table, and ends them; 0 turns it off")
	fs.IntVar(&f.lockTableShare, "tenant-lock-table-share", tenant.DefaultLockTableShare, "percentage of the server's shared lock table the sessions of one namespace's login roles may hold together before the operator ends and quarantines them all (1..100)")
	fs.DurationVar(&f.lockQuarantine, "tenant-lock-quarantine", tenant.DefaultQuarantine, "how long the operator first refuses the logins of a tenant login role whose sessions it ended for holding too many locks (CONNECTION LIMIT 0), doubling on each repeat up to 10m")
	fs.IntVar(&f.lockThreshold, "tenant-lock-threshold", 0, "locks of the server's shared lock table a tenant session may hold before the operator ends it; 0 = twice the server's max_locks_per_transaction")
	fs.StringVar(&f.tempFileLimit, "tenant-temp-file-limit", tenant.DefaultTempFileLimit, "temp_file_limit set on every tenant login role (a PostgreSQL size: 2GB, 500MB; -1 sets none): a tenant cannot SET it away; needs a superuser admin or GRANT SET ON PARAMETER temp_file_limit, else a DBAActionNeeded event")
	fs.IntVar(&f.connectionShare, "tenant-connection-share", controller.DefaultTenantConnectionShare, "percentage of the server's connection slots (max_connections less the reserved ones) the login roles of one namespace may hold together: each one's CONNECTION LIMIT is its part, never raised by replicas; 0 sets no limit")
	fs.DurationVar(&f.grantCheckInterval, "grant-check-interval", controller.DefaultGrantCheckInterval, "how often each Ready tenant's schema, roles and grants are verified and repaired in PostgreSQL")
	fs.DurationVar(&f.textSearchMinInterval, "text-search-min-interval", controller.DefaultTextSearchMinInterval, "how long after one switch of a tenant's text search configuration (a refill of its rows and an index build) the next may start; negative: no minimum")
	fs.StringVar(&f.serviceImage, "service-image", os.Getenv(naming.EnvServiceImage), "image of the memory service and jobs when a MemoryRuntime sets none (env ENGRAM_IMAGE); default: the operator's own, read from its pod (POD_NAME)")
	fs.StringVar(&f.metricsNamespaces, "service-metrics-namespaces", controller.DefaultMetricsNamespaces, "label selector of the namespaces (where Prometheus runs) whose pods may reach the memory services' metrics port; each runtime's NetworkPolicy admits it from there only")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "json", "json or text")
	config.RegisterFlags(fs) // --kubeconfig, for running outside a cluster
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if f.tenantServerTimeout < time.Second {
		return nil, fmt.Errorf("--tenant-server-timeout %s is below the minimum of 1s", f.tenantServerTimeout)
	}
	if f.blockerMaxAge < time.Second {
		return nil, fmt.Errorf("--tenant-blocker-max-age %s is below the minimum of 1s", f.blockerMaxAge)
	}
	if f.reaperInterval != 0 && f.reaperInterval < time.Second {
		return nil, fmt.Errorf("--tenant-reaper-interval %s is below the minimum of 1s (0 turns it off)", f.reaperInterval)
	}
	if f.lockWatchInterval != 0 && f.lockWatchInterval < 100*time.Millisecond {
		return nil, fmt.Errorf("--tenant-lock-watch-interval %s is below the minimum of 100ms (0 turns it off)", f.lockWatchInterval)
	}
	if f.lockTableShare < 1 || f.lockTableShare > 100 {
		return nil, fmt.Errorf("--tenant-lock-table-share %d: must be within 1..100", f.lockTableShare)
	}
	if f.lockQuarantine < time.Second {
		return nil, fmt.Errorf("--tenant-lock-quarantine %s: must be 1s or more", f.lockQuarantine)
	}
	if f.lockThreshold < 0 {
		return nil, fmt.Errorf("--tenant-lock-threshold %d: must be 0 (the default) or more", f.lockThreshold)
	}
	if !tempFileLimitRE.MatchString(f.tempFileLimit) {
		return nil, fmt.Errorf("--tenant-temp-file-limit %q: must be a PostgreSQL size (2GB, 500MB, 1048576kB) or -1", f.tempFileLimit)
	}
	if f.connectionShare < 0 || f.connectionShare > 100 {
		return nil, fmt.Errorf("--tenant-connection-share %d: must be within 0..100 (0 sets no limit)", f.connectionShare)
	}
	if f.dbCheckInterval < 5*time.Second {
		return nil, fmt.Errorf("--database-check-interval %s is below the minimum of 5s", f.dbCheckInterval)
	}
	if f.grantCheckInterval < time.Minute {
		return nil, fmt.Errorf("--grant-check-interval %s is below the minimum of 1m", f.grantCheckInterval)
	}
	if _, err := controller.ParseMetricsNamespaces(f.metricsNamespaces); err != nil {
		return nil, fmt.Errorf("--service-metrics-namespaces: %w", err)
	}
	for _, c := range []int{f.runtimeConcurrency, f.policyConcurrency, f.jobConcurrency, f.dbConcurrency} {
		if c < 1 {
			return nil, errors.New("--max-concurrent-reconciles-* must be at least 1")
		}
	}
	return f, nil
}

// tempFileLimitRE is what --tenant-temp-file-limit accepts: it is written
// into ALTER ROLE … SET temp_file_limit = '…'.
var tempFileLimitRE = regexp.MustCompile(`^(-1|[0-9]{1,12}(kB|MB|GB|TB)?)$`)

// connectionShare is Options.TenantConnectionShare of the flag: 0 sets no
// limit, which Options spells as negative (its zero is the default).
func connectionShare(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}

// reaperInterval is Options.TenantReaperInterval of the flag: 0 turns the
// reaper off, which Options spells as negative (its zero is the default).
func reaperInterval(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}

// runController is `manager` (or `manager controller`): the operator.
func runController(args []string) int {
	f, err := parseControllerFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 2
	}
	handler, err := workload.NewHandler(os.Stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 2
	}
	log := logr.FromSlogHandler(handler)
	ctrl.SetLogger(log)
	namespaces, err := controller.ParseNamespaces(f.watchNamespaces)
	if err != nil {
		log.Error(err, "invalid --watch-namespaces")
		return 2
	}
	metricsNamespaces, _ := controller.ParseMetricsNamespaces(f.metricsNamespaces) // checked with the flags
	if f.operatorNamespace == "" {
		log.Info("no --operator-namespace (POD_NAMESPACE): clusterConnection cannot be resolved")
	}

	cfg, err := config.GetConfig()
	if err != nil {
		log.Error(err, "loading the Kubernetes client configuration")
		return 1
	}
	if f.serviceImage == "" {
		f.serviceImage = ownImage(cfg, f.operatorNamespace, os.Getenv(naming.EnvPodName), log)
	}
	if f.serviceImage == "" {
		log.Info("no --service-image (ENGRAM_IMAGE): MemoryRuntimes without spec.service.image will report ImageNotSet")
	}
	mgr, err := controller.NewManager(cfg, ctrl.Options{
		Metrics:                       metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:        f.probeAddr,
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              "engram-operator.memory.engram.dev",
		LeaderElectionNamespace:       f.operatorNamespace,
		LeaderElectionReleaseOnCancel: true,
	}, controller.Options{
		OperatorNamespace:       f.operatorNamespace,
		WatchNamespaces:         namespaces,
		ServiceImage:            f.serviceImage,
		MetricsNamespaces:       metricsNamespaces,
		GrantCheckInterval:      f.grantCheckInterval,
		TextSearchMinInterval:   f.textSearchMinInterval,
		LockTimeout:             f.dbLockTimeout,
		DatabaseTimeout:         f.dbTimeout,
		MigrationTimeout:        f.migrationTimeout,
		TenantServerTimeout:     f.tenantServerTimeout,
		MoveFreezeTimeout:       f.moveFreezeTimeout,
		TenantBlockerMaxAge:     f.blockerMaxAge,
		TenantReaperInterval:    reaperInterval(f.reaperInterval),
		TenantLockWatchInterval: reaperInterval(f.lockWatchInterval),
		TenantLockThreshold:     f.lockThreshold,
		TenantLockTableShare:    f.lockTableShare,
		TenantLockQuarantine:    f.lockQuarantine,
		TenantConnectionShare:   connectionShare(f.connectionShare),
		TenantTempFileLimit:     f.tempFileLimit,
		RuntimeConcurrency:      f.runtimeConcurrency,
		PolicyConcurrency:       f.policyConcurrency,
		RetentionJobConcurrency: f.jobConcurrency,
		DatabaseConcurrency:     f.dbConcurrency,
		DatabaseCheckInterval:   f.dbCheckInterval,
	})
	if err != nil {
		log.Error(err, "setting up the operator")
		return 1
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		return 1
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informers not synced")
		}
		return nil
	}); err != nil {
		log.Error(err, "adding the readiness check")
		return 1
	}
	log.Info("starting the operator", "watchNamespaces", namespaces, "operatorNamespace", f.operatorNamespace,
		"serviceImage", f.serviceImage, "grantCheckInterval", f.grantCheckInterval.String(), "leaderElection", f.leaderElect)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "the operator stopped")
		return 1
	}
	return 0
}

// ownImage finds the operator's own image by reading its pod (POD_NAME and
// POD_NAMESPACE from the downward API), so a kustomize or Helm image
// override needs no second setting for the services and jobs. It returns ""
// when that is not possible.
func ownImage(cfg *rest.Config, namespace, podName string, log logr.Logger) string {
	if namespace == "" || podName == "" {
		return ""
	}
	c, err := client.New(cfg, client.Options{Scheme: controller.NewScheme()})
	if err != nil {
		log.Error(err, "finding the operator's own image")
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingFieldsSelector{
		Selector: fields.OneTermEqualSelector("metadata.name", podName),
	}); err != nil || len(pods.Items) == 0 {
		log.Error(err, "finding the operator's own image", "pod", podName)
		return ""
	}
	for _, ctr := range pods.Items[0].Spec.Containers {
		if ctr.Name == "manager" {
			return ctr.Image
		}
	}
	return pods.Items[0].Spec.Containers[0].Image
}
