package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// reconcileDelete carries out the reclaim policy, then lets the runtime go.
// The owned Kubernetes objects are removed by the garbage collector (owner
// references); only the database needs the operator.
func (r *MemoryRuntimeReconciler) reconcileDelete(ctx context.Context, s *runtimeScope) (reconcile.Result, error) {
	rt := s.rt
	if !controllerutil.ContainsFinalizer(rt, naming.Finalizer) {
		s.facts.untouched = true
		r.memory.forget(rt.UID)
		return doneResult(), nil
	}
	schema := SchemaFor(rt)
	if err := (serverMover{r}).reclaimServerMove(ctx, s, schema); err != nil {
		return doneResult(), err
	}
	if rt.ReclaimPolicyOrDefault() == memoryv1alpha1.ReclaimDelete {
		if err := r.dropTenant(ctx, s, schema); err != nil {
			return doneResult(), err
		}
	} else {
		reclaims.WithLabelValues("retained").Inc()
		r.eventer().normal(rt, "Retained", "Reclaim", "schema %s and its roles are kept (reclaimPolicy Retain)", schema)
	}

	patched := rt.DeepCopy()
	controllerutil.RemoveFinalizer(patched, naming.Finalizer)
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(rt, client.MergeFromWithOptimisticLock{}), client.FieldOwner(naming.FieldOwner)); err != nil {
		return doneResult(), client.IgnoreNotFound(fmt.Errorf("removing the finalizer: %w", err))
	}
	rt.Finalizers, rt.ResourceVersion = patched.Finalizers, patched.ResourceVersion
	r.memory.forget(rt.UID)
	return doneResult(), nil
}

// dropTenant drops the schema and roles of a runtime with reclaimPolicy
// Delete. It never drops what Engram did not create (tenant.Drop refuses).
// When the connection Secret is already gone (the namespace is being
// deleted) and no pool is left, the schema is kept and a warning says so:
// blocking the namespace forever would be worse.
func (r *MemoryRuntimeReconciler) dropTenant(ctx context.Context, s *runtimeScope, schema string) error {
	rt := s.rt
	if rt.UsesMemoryDatabase() && rt.PlacedDatabase() == "" {
		reclaims.WithLabelValues("dropped").Inc()
		r.eventer().normal(rt, "Reclaimed", "Reclaim", "reclaimPolicy Delete: the tenant was never placed on a database, nothing to drop")
		return nil
	}
	pool, url, err := r.poolForDelete(ctx, rt)
	if err != nil {
		return err
	}
	if pool == nil {
		reclaims.WithLabelValues("skipped").Inc()
		r.eventer().warning(rt, "ReclaimSkipped", "Reclaim",
			"the admin connection is gone, so schema %s and its roles were kept; drop them by hand if they are no longer needed", schema)
		return nil
	}
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	res, err := tenant.Drop(dbctx, pool, schema, TenantOwner(rt))
	switch {
	case errors.Is(err, tenant.ErrNotManaged), errors.Is(err, tenant.ErrOwnedByOther):
		reclaims.WithLabelValues("skipped").Inc()
		r.eventer().warning(rt, provisionReason(err), "Reclaim", "not dropping: %s", scrubAdmin(err.Error(), url))
		return nil
	case err != nil:
		msg := scrubAdmin(err.Error(), url)
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, provisionReason(err), fmt.Sprintf(
			"dropping the tenant (reclaimPolicy Delete) failed, retrying; set reclaimPolicy: Retain to delete without dropping: %s", msg))
		return fmt.Errorf("dropping the tenant: %s", msg)
	}
	what := "nothing was left to drop"
	if res.SchemaDropped || len(res.RolesDropped) > 0 {
		what = fmt.Sprintf("dropped schema %s (%v) and roles [%s]", schema, res.SchemaDropped, strings.Join(res.RolesDropped, ", "))
	}
	reclaims.WithLabelValues("dropped").Inc()
	r.eventer().normal(rt, "Reclaimed", "Reclaim", "reclaimPolicy Delete: %s", what)
	return nil
}

// poolForDelete resolves the admin pool of a runtime being deleted: nil
// (without error) when its connection Secret no longer exists and no pool
// for it is cached.
func (r *MemoryRuntimeReconciler) poolForDelete(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime) (*pgxpool.Pool, string, error) {
	if name := rt.PlacedDatabase(); name != "" {
		return r.databasePoolForDelete(ctx, name)
	}
	id := connectionID(rt)
	url, err := adminURL(ctx, r.secrets, rt, r.opts.OperatorNamespace)
	return r.deletionPool(id, url, err)
}

// databasePoolForDelete is poolForDelete for a tenant placed on a
// MemoryDatabase: the database it was placed on, whatever the spec says
// now; nil when that database or its Secret is gone and no pool is cached.
func (r *MemoryRuntimeReconciler) databasePoolForDelete(ctx context.Context, name string) (*pgxpool.Pool, string, error) {
	id := databaseConnID(name)
	var db memoryv1alpha1.MemoryDatabase
	found, err := getOptional(ctx, r.client, client.ObjectKey{Name: name}, &db)
	if err != nil {
		return nil, "", fmt.Errorf("reading MemoryDatabase %q: %w", name, err)
	}
	if _, over := specOverBound(&db); !found || over {
		// Gone, or kept without its spec (its Secret unknown): the pool
		// cached from before, if any.
		return r.pools.peek(id), "", nil
	}
	url, err := databaseURL(ctx, r.secrets, &db, r.opts.OperatorNamespace)
	return r.deletionPool(id, url, err)
}

// deletionPool is the pool of connection id at url, given the error of
// reading that URL: when the connection Secret is gone, the pool cached
// from before (nil if none), so a deletion can still drop or skip the
// tenant instead of failing on the missing Secret.
func (r *MemoryRuntimeReconciler) deletionPool(id, url string, urlErr error) (*pgxpool.Pool, string, error) {
	if urlErr != nil {
		if reasonOf(urlErr, "") == memoryv1alpha1.ReasonConnectionSecretNotFound {
			return r.pools.peek(id), "", nil
		}
		return nil, "", urlErr
	}
	pool, err := r.pools.get(id, url)
	return pool, url, err
}
