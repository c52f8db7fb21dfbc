package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/engram-dev/engram/internal/tenant"
)

// MemoryDatabaseReconciler keeps the status of each MemoryDatabase: a
// periodic check (every Options.DatabaseCheckInterval, jittered) connects
// with the database's admin Secret through the shared pool, reads the
// version, the extensions, Citus's workers and the size, and counts the
// tenants placed there. The status is written only when one of those
// changed, so a healthy idle database costs no API write.
type MemoryDatabaseReconciler struct {
	client  client.Client
	secrets *secretReader
	pools   *poolCache
	events  events.EventRecorder
	opts    Options
}

// Reconcile checks one MemoryDatabase.
func (r *MemoryDatabaseReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	db := &memoryv1alpha1.MemoryDatabase{}
	if err := r.client.Get(ctx, req.NamespacedName, db); err != nil {
		if client.IgnoreNotFound(err) == nil {
			forgetDatabaseMetrics(req.Name)
		}
		return doneResult(), client.IgnoreNotFound(err)
	}
	if !db.DeletionTimestamp.IsZero() {
		return doneResult(), nil
	}
	if over, err := refuseSpecOverBound(ctx, r.client, db, func(o *memoryv1alpha1.MemoryDatabase) any { return o.Status }); over {
		return doneResult(), err
	}
	orig := db.DeepCopy()
	var f databaseFacts
	defer func() {
		f.err = retErr
		deriveDatabaseStatus(db, f)
		noteMetadataOverBound(db)
		stampLastCheck(orig, db, time.Now())
		r.reportTransition(orig, db)
		retErr = errors.Join(retErr, patchStatus(ctx, r.client, orig, db, func(o *memoryv1alpha1.MemoryDatabase) any { return o.Status }))
	}()

	tenants, err := r.countTenants(ctx, db.Name)
	if err != nil {
		return doneResult(), err
	}
	f.tenants = &tenants
	info, failure, err := r.check(ctx, db)
	if err != nil {
		return doneResult(), err
	}
	f.info, f.failure = info, failure
	databaseLastCheck.WithLabelValues(db.Name).SetToCurrentTime()
	return requeueAfter(jittered(r.opts.DatabaseCheckInterval)), nil
}

// check connects to the database and inspects it. A database that cannot
// be reached or whose Secret is missing or wrong is a failure (reported in
// the status, checked again at the interval), not an error; an error is an
// API read that failed (retried with backoff).
func (r *MemoryDatabaseReconciler) check(ctx context.Context, db *memoryv1alpha1.MemoryDatabase) (*tenant.ServerInfo, *blocker, error) {
	url, err := databaseURL(ctx, r.secrets, db, r.opts.OperatorNamespace)
	if err != nil {
		reason := reasonOf(err, "")
		if reason == "" {
			return nil, nil, err
		}
		return nil, &blocker{cond: memoryv1alpha1.ConditionReachable, reason: reason, message: err.Error()}, nil
	}
	pool, err := r.pools.get(databaseConnID(db.Name), url)
	if err != nil {
		return nil, &blocker{cond: memoryv1alpha1.ConditionReachable, reason: memoryv1alpha1.ReasonConnectionInvalid, message: err.Error()}, nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.ConnectTimeout+r.opts.DatabaseTimeout)
	defer cancel()
	info, err := tenant.Inspect(cctx, pool)
	if err != nil {
		reason := memoryv1alpha1.ReasonCheckFailed
		switch {
		case isAuthError(err) || isUnknownDatabase(err):
			reason = memoryv1alpha1.ReasonConnectionInvalid
		case isConnectError(err):
			reason = memoryv1alpha1.ReasonDatabaseUnreachable
		}
		return nil, &blocker{cond: memoryv1alpha1.ConditionReachable, reason: reason, message: stableMessage(scrubAdmin(err.Error(), url))}, nil
	}
	r.pools.prove(databaseConnID(db.Name))
	return info, nil, nil
}

// countTenants is the number of runtimes whose status.database names the database.
func (r *MemoryDatabaseReconciler) countTenants(ctx context.Context, name string) (int32, error) {
	var list memoryv1alpha1.MemoryRuntimeList
	if err := r.client.List(ctx, &list, client.MatchingFields{indexPlacedDatabase: name}); err != nil {
		return 0, fmt.Errorf("listing the runtimes placed on %q: %w", name, err)
	}
	return int32(len(list.Items)), nil
}

// reportTransition records an event when the database becomes unreachable
// or reachable again: once per transition, never per check.
func (r *MemoryDatabaseReconciler) reportTransition(orig, db *memoryv1alpha1.MemoryDatabase) {
	before, after := orig.GetCondition(memoryv1alpha1.ConditionReachable), db.GetCondition(memoryv1alpha1.ConditionReachable)
	if after == nil || before != nil && before.Status == after.Status && before.Reason == after.Reason {
		return
	}
	if after.Status == "True" {
		if before != nil {
			eventer{rec: r.events}.normal(db, memoryv1alpha1.ReasonConnected, "Check", "%s", after.Message)
		}
		return
	}
	eventer{rec: r.events}.warning(db, after.Reason, "Check", "%s", after.Message)
}

// jittered spreads the checks of many databases: d plus up to a tenth of it.
func jittered(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

func (r *MemoryDatabaseReconciler) setupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		// Status-only updates are the operator's own writes: they must not
		// start another check at once.
		For(&memoryv1alpha1.MemoryDatabase{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// A tenant placed, or gone: the count changes.
		Watches(&memoryv1alpha1.MemoryRuntime{}, handler.EnqueueRequestsFromMapFunc(databaseOfRuntime), builder.WithPredicates(placementChanged)).
		// Its admin Secret created or edited.
		WatchesRawSource(source.Kind[client.Object](r.secrets.meta, secretMetadata(), handler.EnqueueRequestsFromMapFunc(r.databasesOfSecret))).
		WithOptions(controllerOptions(r.opts.DatabaseConcurrency, rateLimiter(r.opts))).
		Complete(r)
}

// databaseOfRuntime maps a runtime to the database it is placed on (for
// an update, the old and the new object are both mapped).
func databaseOfRuntime(_ context.Context, obj client.Object) []reconcile.Request {
	rt, ok := obj.(*memoryv1alpha1.MemoryRuntime)
	if !ok || rt.PlacedDatabase() == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: rt.PlacedDatabase()}}}
}

// placementChanged passes the runtime events that change a database's
// tenant count: created or deleted placed, or status.database changed.
var placementChanged = predicate.Funcs{
	UpdateFunc: func(ev event.UpdateEvent) bool {
		a, ok1 := ev.ObjectOld.(*memoryv1alpha1.MemoryRuntime)
		b, ok2 := ev.ObjectNew.(*memoryv1alpha1.MemoryRuntime)
		return !ok1 || !ok2 || a.PlacedDatabase() != b.PlacedDatabase()
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// databasesOfSecret maps a Secret of the operator's namespace to the
// databases that name it.
func (r *MemoryDatabaseReconciler) databasesOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() != r.opts.OperatorNamespace {
		return nil
	}
	return listDatabases(ctx, r.client, client.MatchingFields{indexDatabaseSecret: obj.GetName()})
}

func listDatabases(ctx context.Context, c client.Reader, opts ...client.ListOption) []reconcile.Request {
	var list memoryv1alpha1.MemoryDatabaseList
	if err := c.List(ctx, &list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing MemoryDatabases for a watch event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, db := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: db.Name}})
	}
	return reqs
}

// reachabilityChanged passes the database events after which the runtimes
// placed there must look again: the check's verdict flipped, the spec
// (Secret, database name) changed, or the database appeared or went.
var reachabilityChanged = databaseUpdates(func(a, b *memoryv1alpha1.MemoryDatabase) bool {
	ca, cb := meta.FindStatusCondition(a.Status.Conditions, memoryv1alpha1.ConditionReachable), meta.FindStatusCondition(b.Status.Conditions, memoryv1alpha1.ConditionReachable)
	return a.Generation != b.Generation || (ca == nil) != (cb == nil) ||
		ca != nil && cb != nil && (ca.Status != cb.Status || ca.Reason != cb.Reason || ca.ObservedGeneration != cb.ObservedGeneration)
})

// placementRelevant passes the database events that may let a waiting
// runtime be placed: anything but a status that changed only its
// lastCheck (which changes with every other field anyway).
var placementRelevant = databaseUpdates(func(a, b *memoryv1alpha1.MemoryDatabase) bool {
	sa, sb := a.Status.DeepCopy(), b.Status.DeepCopy()
	sa.LastCheck, sb.LastCheck = nil, nil
	return a.Generation != b.Generation || !equality.Semantic.DeepEqual(a.Labels, b.Labels) || !equality.Semantic.DeepEqual(sa, sb)
})

// databaseUpdates passes the updates of a MemoryDatabase that changed
// reports (an update of any other object too), every create and delete,
// and no generic event.
func databaseUpdates(changed func(before, after *memoryv1alpha1.MemoryDatabase) bool) predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(ev event.UpdateEvent) bool {
			a, ok1 := ev.ObjectOld.(*memoryv1alpha1.MemoryDatabase)
			b, ok2 := ev.ObjectNew.(*memoryv1alpha1.MemoryDatabase)
			return !ok1 || !ok2 || changed(a, b)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
