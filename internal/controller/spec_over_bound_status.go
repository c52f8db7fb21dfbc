package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// The status of an Engram object the cache keeps without its spec
// (cache_engram_spec.go).

// specOverBoundMessage is what Ready says of an object over the bound.
func specOverBoundMessage(held int) string {
	return fmt.Sprintf("the object holds about %d KiB; the operator reads at most %d KiB of one and changes nothing for it until it is shortened: shorten spec.service.affinity, tolerations, nodeSelector or the selectors (docs/security.md)",
		held>>10, maxEngramHeldBytes>>10)
}

// readyConditioned is an Engram object whose Ready and Stalled conditions
// a reconciler sets.
type readyConditioned interface {
	conditioned
	SetCondition(condType string, ok bool, reason, message string)
	SetStalled(reason, message string)
	MarkObserved()
}

// readToReconcile reads the object req names into obj; done says the
// reconcile ends there: the object is gone, or its spec is over the bound
// (refuseSpecOverBound; err is what that status patch returned).
func readToReconcile[T readyConditioned](ctx context.Context, c client.Client, req reconcile.Request, obj T, status func(T) any) (done bool, err error) {
	if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	return refuseSpecOverBound(ctx, c, obj, status)
}

// refuseSpecOverBound, at the start of a reconcile, sets Ready=False on an
// object the cache keeps without its spec (specOverBoundCopy), and reports
// whether it did: the reconcile then ends without touching anything the
// object owns (never applying defaults from the empty spec, never
// deleting), until a shorter spec brings the whole object back.
func refuseSpecOverBound[T readyConditioned](ctx context.Context, c client.Client, obj T, status func(T) any) (bool, error) {
	held, over := specOverBound(obj)
	if !over {
		return false, nil
	}
	orig := obj.DeepCopyObject().(T)
	msg := specOverBoundMessage(held)
	obj.SetCondition(memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonSpecTooLarge, msg)
	// Stuck until a person shortens it (kstatus: Stalled, not in progress).
	if r, ok := any(obj).(interface{ SetReconciling(reason, message string) }); ok {
		r.SetReconciling("", "")
	}
	obj.SetStalled(memoryv1alpha1.ReasonSpecTooLarge, msg)
	obj.MarkObserved()
	return true, patchStatus(ctx, c, orig, obj, status)
}
