package controller

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// NewScheme returns a scheme with the Kubernetes kinds and Engram's.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(memoryv1alpha1.AddToScheme(s))
	return s
}

// ManagerOptions completes manager options for the operator: the scheme and
// a cache that holds only what the operator needs — owned kinds (Secrets
// included) only when they carry app.kubernetes.io/managed-by=engram-operator,
// and with WatchNamespaces set, only those namespaces; of those, only the
// objects the operator wrote are kept whole, and only below a size cap, the
// others as stubs (see cache_transform.go). The Secrets users name are not in it: see secrets.go.
func ManagerOptions(base ctrl.Options, o Options) ctrl.Options {
	if base.Scheme == nil {
		base.Scheme = NewScheme()
	}
	base.Cache = CacheOptions(o)
	return base
}

// CacheOptions is the cache configuration described at ManagerOptions.
func CacheOptions(o Options) cache.Options {
	managed := labels.SelectorFromSet(naming.ManagedLabels())
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		// keepOwnedWhole (cache_transform.go): the label alone proves nothing.
		&appsv1.Deployment{}:            {Label: managed, Transform: keepOwnedWhole},
		&corev1.Service{}:               {Label: managed, Transform: keepOwnedWhole},
		&corev1.ConfigMap{}:             {Label: managed, Transform: keepOwnedWhole},
		&corev1.Secret{}:                {Label: managed, Transform: keepOwnedWhole},
		&networkingv1.NetworkPolicy{}:   {Label: managed, Transform: keepOwnedWhole},
		&policyv1.PodDisruptionBudget{}: {Label: managed, Transform: keepOwnedWhole},
		&batchv1.CronJob{}:              {Label: managed, Transform: keepOwnedWhole},
		&batchv1.Job{}:                  {Label: managed, Transform: keepOwnedWhole},
		// Engram's kinds, without managed fields and others' annotations.
		&memoryv1alpha1.MemoryRuntime{}:  {Transform: keepEngramAnnotations},
		&memoryv1alpha1.MemoryPolicy{}:   {Transform: keepEngramAnnotations},
		&memoryv1alpha1.RetentionJob{}:   {Transform: keepEngramAnnotations},
		&memoryv1alpha1.MemoryDatabase{}: {Transform: keepEngramAnnotations},
		// Namespaces (cluster-scoped, whatever WatchNamespaces says): their
		// name and bounded labels only, for spec.allowedNamespaces.
		&corev1.Namespace{}: {Transform: keepNamespaceLabels},
	}}
	if len(o.WatchNamespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// NewManager creates a manager with ManagerOptions and sets the operator up in it.
func NewManager(cfg *rest.Config, base ctrl.Options, o Options) (manager.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ManagerOptions(base, o))
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := Setup(mgr, o); err != nil {
		return nil, err
	}
	return mgr, nil
}

// setupHook, when set (by tests only), is given the MemoryRuntime
// reconciler Setup creates: the restart test builds a fresh one beside it.
var setupHook func(*MemoryRuntimeReconciler)

// Setup registers the field indexes and the four reconcilers with mgr.
func Setup(mgr manager.Manager, o Options) error {
	o = o.withDefaults()
	ctx := context.Background()
	if err := registerIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	pools := newPoolCache(o)
	if err := mgr.Add(pools); err != nil {
		return fmt.Errorf("adding the connection pools: %w", err)
	}
	if o.TenantReaperInterval > 0 {
		if err := mgr.Add(newTransactionReaper(mgr.GetClient(), pools, mgr.GetEventRecorder(naming.FieldOwner), o)); err != nil {
			return fmt.Errorf("adding the transaction reaper: %w", err)
		}
	}
	if o.TenantLockWatchInterval > 0 {
		if err := mgr.Add(newLockWatchdog(mgr.GetClient(), pools, mgr.GetEventRecorder(naming.FieldOwner), o)); err != nil {
			return fmt.Errorf("adding the lock watchdog: %w", err)
		}
	}
	secretMeta, err := newSecretMetadataCache(mgr, o)
	if err != nil {
		return err
	}
	app := &applier{client: mgr.GetClient(), reader: mgr.GetAPIReader(), scheme: mgr.GetScheme()}
	statusMetrics.use(mgr.GetClient()) // metrics_status.go

	runtimes := &MemoryRuntimeReconciler{
		client: mgr.GetClient(),
		reader: mgr.GetAPIReader(),
		// Every runtime reads its Secrets at least once per grant check.
		secrets: newSecretReader(secretMeta, mgr.GetAPIReader(), 2*o.GrantCheckInterval),
		apply:   app,
		pools:   pools,
		events:  mgr.GetEventRecorder(naming.FieldOwner),
		opts:    o,
		memory:  newRuntimeMemory(),
		placer:  newPlacer(),
		slots:   newNamespaceSlots(),
		wakeups: newDueWakeups(),
	}
	if err := runtimes.setupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the MemoryRuntime controller: %w", err)
	}
	if setupHook != nil {
		setupHook(runtimes)
	}
	if err := registerRuntimeCollector(mgr.GetCache()); err != nil {
		return fmt.Errorf("registering the runtime metrics: %w", err)
	}
	databases := &MemoryDatabaseReconciler{
		client: mgr.GetClient(), secrets: runtimes.secrets, pools: pools,
		events: mgr.GetEventRecorder(naming.FieldOwner), opts: o,
	}
	if err := databases.setupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the MemoryDatabase controller: %w", err)
	}
	if err := registerDatabaseCollector(mgr.GetCache()); err != nil {
		return fmt.Errorf("registering the database metrics: %w", err)
	}
	policies := &MemoryPolicyReconciler{client: mgr.GetClient(), events: mgr.GetEventRecorder(naming.FieldOwner), opts: o}
	if err := policies.setupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the MemoryPolicy controller: %w", err)
	}
	jobs := &RetentionJobReconciler{
		client: mgr.GetClient(),
		reader: mgr.GetAPIReader(),
		apply:  app,
		events: mgr.GetEventRecorder(naming.FieldOwner),
		opts:   o,
	}
	if err := jobs.setupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the RetentionJob controller: %w", err)
	}
	return nil
}

// controllerOptions are a controller's options: n reconciles at once,
// failures retried as limiter says.
func controllerOptions(n int, limiter workqueue.TypedRateLimiter[reconcile.Request]) controller.Options {
	return controller.Options{MaxConcurrentReconciles: n, RateLimiter: limiter}
}

// rateLimiter retries a failing key with exponential backoff between
// RetryBaseDelay and RetryMaxDelay (controller-runtime's default goes up to
// 16 minutes, too slow to notice a database that came back), and bounds all
// retries together to 10 per second.
func rateLimiter(o Options) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](o.RetryBaseDelay, o.RetryMaxDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
