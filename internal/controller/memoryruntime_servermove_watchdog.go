package controller

import (
	"context"
	"fmt"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// liftOverdueFreeze enforces --move-freeze-timeout when the move step did
// not run in this reconcile: the runtime is paused (spec.paused), or a
// phase before the move's failed or stopped the pass (a Secret being
// fixed, the API server refusing a write). The move step is the last phase,
// so without this a frozen source would refuse the tenant's writes for as
// long as something unrelated to the move kept failing (review 14, M2).
// A freeze not yet due asks to come back when it is; a pass that ends with
// an error comes back then too (Reconcile notes the due time for the rate
// limiter, due_wakeups.go: controller-runtime ignores the Result then). The lift itself is
// the move's own (liftFreeze): never past Finish, where only the switch
// may end the freeze, and not while the target cannot be asked.
func (r serverMover) liftOverdueFreeze(ctx context.Context, s *runtimeScope) error {
	mv := s.rt.Status.ServerMove
	if mv == nil || mv.Phase != memoryv1alpha1.ServerMoveFrozen || mv.FreezeStartedAt == nil {
		return nil
	}
	if left := r.opts.MoveFreezeTimeout - time.Since(mv.FreezeStartedAt.Time); left > 0 {
		s.requeue.at(left)
		return nil
	}
	// The move acts only on the status it last wrote (see reconcileServerMove).
	if stale, err := r.staleRuntime(ctx, s); err != nil || stale {
		s.requeue.at(moveStaleRetry)
		return err
	}
	source, url, err := r.viaPool(ctx, s.rt, mv.From.Via)
	if err != nil {
		return fmt.Errorf("lifting an overdue freeze: %s", scrubAdmin(err.Error(), url))
	}
	target, url, err := r.viaPool(ctx, s.rt, mv.To.Via)
	if err != nil {
		return fmt.Errorf("lifting an overdue freeze (the target says whether its copy is finished): %s", scrubAdmin(err.Error(), url))
	}
	rel := withPools(r.relocationBase(s), source, target)
	_, _, err = r.liftFreeze(ctx, s, mv.DeepCopy(), rel)
	return err
}
