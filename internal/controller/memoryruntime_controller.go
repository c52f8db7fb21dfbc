package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// MemoryRuntimeReconciler provisions a tenant in PostgreSQL and runs its
// memory service.
type MemoryRuntimeReconciler struct {
	client client.Client
	reader client.Reader // uncached reads, for the rare cases the cache may lag
	// secrets reads the Secrets users name in the spec, which the
	// operator's cache does not hold (it holds only Engram's own).
	secrets *secretReader
	apply   *applier
	pools   *poolCache
	events  events.EventRecorder
	opts    Options
	memory  *runtimeMemory
	// placer decides where tenants with databaseRef or databaseSelector
	// live, one at a time (memoryruntime_placement.go).
	placer *placer
	// slots lets one reconcile per namespace run at a time
	// (namespace_slots.go).
	slots *namespaceSlots
	// wakeups holds a frozen source's lift on a failing pass's path
	// (due_wakeups.go).
	wakeups *dueWakeups
}

// runtimeState is what the operator remembers about a runtime between
// reconciles, in memory only. It is an optimization, never the source of a
// decision: everything that matters is in the cluster (status, the
// password digest annotation on the credentials Secret) or the database.
// It lets a Ready tenant skip the grant check between intervals, and it
// covers the short time in which the cache has not yet seen the operator's
// own last write (so a rotation is never done twice for one request). A
// restarted operator starts with it empty and verifies the tenant once,
// writing nothing (restart_envtest_test.go).
type runtimeState struct {
	// checkedAt is when the tenant was last provisioned or verified, for the
	// inputs summed up in fingerprint.
	checkedAt     time.Time
	fingerprint   string
	schemaVersion int
	// password is the login password the operator last wrote.
	password string
	// rotated is the last rotate-credentials value acted on.
	rotated string
	// warned is the reason of the last provisioning Warning event, so a
	// failure that persists is reported once, not on every retry (the
	// condition in the cache may lag behind this reconciler's last write).
	warned string
	// dbReady is the status of DatabaseReady this process last wrote (or
	// found already written), "" when unknown: see observedDBReady.
	dbReady metav1.ConditionStatus
	// provisioned is the message of the DatabaseReady=True this process
	// last wrote (reassertReady).
	provisioned string
	// text is the tenant's text search pacing (textsearch_pace.go).
	text textPace
	// admittedOn is the MemoryDatabase whose placement of this runtime
	// this process has checked (checkPlacedAdmission).
	admittedOn string
	// vectorsHeld: the tenant was seen holding vectors (checkEmbedder).
	vectorsHeld bool
}

type runtimeMemory struct {
	mu sync.Mutex
	m  map[types.UID]runtimeState
}

func newRuntimeMemory() *runtimeMemory { return &runtimeMemory{m: map[types.UID]runtimeState{}} }

func (m *runtimeMemory) get(uid types.UID) runtimeState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[uid]
}

func (m *runtimeMemory) update(uid types.UID, fn func(*runtimeState)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.m[uid]
	fn(&s)
	m.m[uid] = s
}

func (m *runtimeMemory) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, uid)
}

// runtimeScope carries what the phases of one reconcile learn.
type runtimeScope struct {
	rt *memoryv1alpha1.MemoryRuntime
	// orig is the runtime as read, what the final status patch compares
	// with (a phase that must write part of the status at once, the
	// placement, updates both).
	orig   *memoryv1alpha1.MemoryRuntime
	schema string
	// recorded is status.schema as it was before this reconcile: the
	// schema this runtime was provisioned with earlier, if any.
	recorded string
	connID   string
	admin    string // admin connection URL
	pool     *pgxpool.Pool
	created  string // the password Provision set when it created the login role
	creds    specs.Credentials
	apiKeys  []string // digests of the API keys, for the pod template hash
	// rerankKey is the policy's reranker key reference (nil: none); the
	// service pods get it as an environment variable.
	rerankKey *memoryv1alpha1.SecretKeySelector
	// policyName names the policy rerankKey comes from, for messages.
	policyName string
	// dual is set while a re-embed fills: the service's config and
	// Deployment are rendered with both embedders (memoryruntime_dual.go).
	dual    *dualEmbedders
	config  []byte
	hash    string
	image   string
	deploy  *appsv1.Deployment
	requeue requeueTimer
	// faulted is set when Options.FailAfter injected a fault: the reconcile
	// stops as if the operator had died (see Options.FailAfter).
	faulted bool
	// facts is what the phases observed, for the status (runtime_status.go).
	facts runtimeFacts
}

// failAfter calls the Options.FailAfter test seam after step.
func (r *MemoryRuntimeReconciler) failAfter(s *runtimeScope, step string) error {
	if r.opts.FailAfter == nil {
		return nil
	}
	if err := r.opts.FailAfter(client.ObjectKeyFromObject(s.rt), step); err != nil {
		s.faulted = true
		return fmt.Errorf("injected fault after %s: %w", step, err)
	}
	return nil
}

// runtimePhase is one step of a reconcile. It records what it observed in
// s.facts (never a condition: deriveRuntimeStatus sets those at the end);
// stop ends the reconcile early without an error (waiting for a watched
// object to change), an error ends it and retries with backoff.
type runtimePhase func(ctx context.Context, s *runtimeScope) (stop bool, err error)

// Reconcile brings one MemoryRuntime to its declared state.
func (r *MemoryRuntimeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, retErr error) {
	rt := &memoryv1alpha1.MemoryRuntime{}
	if done, err := readToReconcile(ctx, r.client, req, rt, runtimeStatus); done {
		return doneResult(), err
	}
	// Before anything is written (the status patch below): a namespace
	// whose other runtime holds a worker waits for it without holding one.
	if !r.slots.take(req.NamespacedName) {
		return reconcile.Result{RequeueAfter: namespaceBusyRetry}, nil
	}
	defer r.slots.give(req.NamespacedName)
	orig := rt.DeepCopy()
	s := &runtimeScope{rt: rt, orig: orig, schema: SchemaFor(rt), recorded: orig.Status.Schema, connID: connectionID(rt)}
	defer func() {
		if s.faulted {
			// A simulated crash (test seam): a dead operator writes no
			// status and its memory is gone.
			r.memory.forget(rt.UID)
			return
		}
		s.facts.err = retErr
		deriveRuntimeStatus(rt, s.facts)
		noteMetadataOverBound(rt)
		res = withPriority(res, queuePriority(rt, s.facts)) // queue_priority.go
		perr := patchStatus(ctx, r.client, orig, rt, runtimeStatus)
		r.rememberDBReady(rt, perr)
		retErr = errors.Join(retErr, perr)
		if retErr != nil {
			// The Result is ignored with an error: the backoff decides when
			// the key comes back, no later than a freeze's due time.
			r.wakeups.note(req, freezeDueIn(rt, r.opts.MoveFreezeTimeout))
			res.RequeueAfter = 0
		}
	}()

	if !rt.DeletionTimestamp.IsZero() {
		s.facts.deleting = true
		return r.reconcileDelete(ctx, s)
	}
	if rt.Spec.Paused {
		s.facts.paused = true
		// Paused leaves the runtime alone, but not writes frozen by a move.
		err := serverMover{r}.liftOverdueFreeze(ctx, s)
		return s.requeue.result(), err
	}

	moved := false
	for _, phase := range []runtimePhase{
		r.ensureFinalizer,
		r.checkOwnership,
		r.reconcilePlacement,
		r.connect,
		serverMover{r}.provisionUnlessFrozen,
		r.moveToWorker,
		// After the credentials: a password Provision has just set (a
		// login role created again) is only in this reconcile; a refused
		// embedder must not lose it.
		r.reconcileCredentials,
		r.reconcileAPIToken,
		r.checkEmbedder,
		r.reconcileConfig,
		r.checkTLSSecret,
		r.reconcileDeployment,
		r.reconcileService,
		r.reconcileNetworkPolicy,
		r.reconcilePodDisruptionBudget,
		// Last: the normal pass ran on the tenant's current server first.
		func(ctx context.Context, s *runtimeScope) (bool, error) {
			moved = true
			return serverMover{r}.reconcileServerMove(ctx, s)
		},
	} {
		stop, err := phase(ctx, s)
		if refused := asNotOwned(err); refused != nil {
			// Not an error to retry with backoff: someone else's object
			// has the name. Report it and look again later.
			r.refuse(s, orig.GetCondition(memoryv1alpha1.ConditionReady), refused)
			break
		}
		if err != nil {
			return doneResult(), errors.Join(err, r.liftUnlessMoved(ctx, s, moved))
		}
		if stop {
			break
		}
	}
	return s.requeue.result(), r.liftUnlessMoved(ctx, s, moved)
}

// liftUnlessMoved enforces a move's freeze timeout when the pass ended
// before the move step (liftOverdueFreeze); nothing after a simulated crash.
func (r *MemoryRuntimeReconciler) liftUnlessMoved(ctx context.Context, s *runtimeScope, moved bool) error {
	if moved || s.faulted {
		return nil
	}
	return serverMover{r}.liftOverdueFreeze(ctx, s)
}

func (r *MemoryRuntimeReconciler) eventer() eventer { return eventer{rec: r.events} }

func (r *MemoryRuntimeReconciler) setupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&memoryv1alpha1.MemoryRuntime{}, builder.WithPredicates(ignoreStatusOnly)).
		Owns(&corev1.Secret{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&appsv1.Deployment{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// A re-embed Job's end (memoryruntime_reembed.go).
		Owns(&batchv1.Job{}).
		Watches(&memoryv1alpha1.MemoryPolicy{}, handler.EnqueueRequestsFromMapFunc(r.runtimesOfPolicy)).
		// Secrets users point at (connection, API keys): metadata only,
		// from a cache of its own (see secrets.go).
		WatchesRawSource(source.Kind[client.Object](r.secrets.meta, secretMetadata(), handler.EnqueueRequestsFromMapFunc(r.runtimesOfSecret))).
		// A database's check flipped: the tenants placed there look again.
		Watches(&memoryv1alpha1.MemoryDatabase{}, handler.EnqueueRequestsFromMapFunc(r.runtimesOnDatabase), builder.WithPredicates(reachabilityChanged)).
		// A database changed: the tenants waiting for a placement try again.
		Watches(&memoryv1alpha1.MemoryDatabase{}, handler.EnqueueRequestsFromMapFunc(r.runtimesAwaitingPlacement), builder.WithPredicates(placementRelevant)).
		// A namespace's labels changed: its runtimes waiting for a
		// placement try again (placed ones stay where they are).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.runtimesAwaitingInNamespace), builder.WithPredicates(namespaceLabelsChanged)).
		// A namespace's reconcile ended: the runtimes that waited for it.
		WatchesRawSource(r.slots.source()).
		WithOptions(controllerOptions(r.opts.RuntimeConcurrency, r.wakeups.limit(rateLimiter(r.opts)))).
		Complete(r)
}

// ignoreStatusOnly drops the update events of a MemoryRuntime that changed
// nothing but its status (the operator's own status writes). Such an event
// would start a reconcile at once, outside the backoff: a failure whose
// message differs from one attempt to the next (a reset connection names
// its local port) would write the status and reconcile again in a hot loop.
var ignoreStatusOnly = predicate.Funcs{UpdateFunc: func(ev event.UpdateEvent) bool {
	before, ok1 := ev.ObjectOld.(*memoryv1alpha1.MemoryRuntime)
	after, ok2 := ev.ObjectNew.(*memoryv1alpha1.MemoryRuntime)
	if !ok1 || !ok2 {
		return true
	}
	a, b := before.DeepCopy(), after.DeepCopy()
	a.Status, b.Status = memoryv1alpha1.MemoryRuntimeStatus{}, memoryv1alpha1.MemoryRuntimeStatus{}
	a.ResourceVersion, b.ResourceVersion = "", ""
	a.ManagedFields, b.ManagedFields = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}}

// runtimesOfPolicy maps a MemoryPolicy to the runtimes that reference it.
func (r *MemoryRuntimeReconciler) runtimesOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.listRuntimes(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexPolicyRef: obj.GetName()})
}

// runtimesOfSecret maps a Secret to the runtimes that read it: by name in
// the runtime's namespace, or as a clusterConnection in the operator's.
func (r *MemoryRuntimeReconciler) runtimesOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	reqs := r.listRuntimes(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexSecretRefs: obj.GetName()})
	reqs = append(reqs, r.runtimesOfPolicySecret(ctx, obj)...)
	if obj.GetNamespace() != r.opts.OperatorNamespace {
		return reqs
	}
	if name := obj.GetLabels()[naming.LabelConnection]; name != "" {
		reqs = append(reqs, r.listRuntimes(ctx, client.MatchingFields{indexClusterConnection: name})...)
	}
	// The admin Secret of MemoryDatabases: their tenants connect anew.
	for _, db := range listDatabases(ctx, r.client, client.MatchingFields{indexDatabaseSecret: obj.GetName()}) {
		reqs = append(reqs, r.listRuntimes(ctx, client.MatchingFields{indexPlacedDatabase: db.Name})...)
	}
	return reqs
}

// runtimesOfPolicySecret maps a Secret to the runtimes whose policy's
// reranker key it holds (the key is read in the runtime's namespace, the
// policy's own).
func (r *MemoryRuntimeReconciler) runtimesOfPolicySecret(ctx context.Context, obj client.Object) []reconcile.Request {
	var policies memoryv1alpha1.MemoryPolicyList
	if err := r.client.List(ctx, &policies, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexPolicySecret: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing MemoryPolicies for a watch event")
		return nil
	}
	var reqs []reconcile.Request
	for i := range policies.Items {
		reqs = append(reqs, r.runtimesOfPolicy(ctx, &policies.Items[i])...)
	}
	return reqs
}

// runtimesOnDatabase maps a MemoryDatabase to the runtimes placed on it.
func (r *MemoryRuntimeReconciler) runtimesOnDatabase(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.listRuntimes(ctx, client.MatchingFields{indexPlacedDatabase: obj.GetName()})
}

// runtimesAwaitingPlacement maps any MemoryDatabase to the runtimes that
// wait for a placement.
func (r *MemoryRuntimeReconciler) runtimesAwaitingPlacement(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.listRuntimes(ctx, client.MatchingFields{indexAwaitingPlacement: "true"})
}

func (r *MemoryRuntimeReconciler) listRuntimes(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list memoryv1alpha1.MemoryRuntimeList
	if err := r.client.List(ctx, &list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing MemoryRuntimes for a watch event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, rt := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rt)})
	}
	return reqs
}

// getOptional reads obj from the cache; a missing object is not an error (found false).
func getOptional(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) (found bool, err error) {
	err = c.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// getOrBlock reads the object kind name of the runtime's namespace into
// obj; a missing one blocks Ready with reason and msg and stops the pass
// (stop), a failed read is an error.
func getOrBlock(ctx context.Context, c client.Reader, s *runtimeScope, kind, name string, obj client.Object, reason, msg string) (stop bool, err error) {
	found, err := getOptional(ctx, c, client.ObjectKey{Namespace: s.rt.Namespace, Name: name}, obj)
	if err != nil {
		return false, fmt.Errorf("reading %s %q: %w", kind, name, err)
	}
	if !found {
		s.facts.block(memoryv1alpha1.ConditionReady, reason, msg)
		return true, nil
	}
	return false, nil
}

// runtimeStatus is what a status patch of a runtime compares.
func runtimeStatus(o *memoryv1alpha1.MemoryRuntime) any { return o.Status }
