package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// moveStepsPerPass bounds the phase steps one reconcile takes (each step is
// itself bounded by Options.MoveSlice or the freeze timeout).
const moveStepsPerPass = 8

// runServerMove takes the running move mv one slice further: Preparing →
// Copying (slices of MoveSlice, requeued at once) → CatchingUp (passes until
// one applies fewer than moveCatchUpEnough rows, or moveCatchUpPasses) →
// Frozen (written before the freeze) → last catch-up, verify, finish, and
// the switch (one status patch: the commit point).
func (r serverMover) runServerMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus) (bool, error) {
	rt := s.rt
	s.facts.moving = movingFact(mv)
	if s.connID != mv.From.Via {
		return false, fmt.Errorf("the move's source connection %s is not the one this pass uses (%s)", mv.From.Via, s.connID)
	}
	rel := r.relocationBase(s)
	rel.Source = s.pool
	target, url, err := r.viaPool(ctx, rt, mv.To.Via)
	if err != nil {
		mv.Message = cutMessage("the move waits for its target connection: "+stableMessage(scrubAdmin(err.Error(), url)), 1000)
		s.rt.Status.ServerMove = mv
		s.facts.moving = movingFact(mv)
		return false, err
	}
	rel.Target = target
	spec, err := r.relocationSpec(ctx, s)
	if err != nil {
		return false, err
	}
	rel.Provision = spec
	th := &serverMoveThrottle{every: r.opts.MoveProgressInterval, last: time.Now()}
	rel.Progress = func(p tenant.RelocateProgress) {
		mv.CopiedRows, mv.TotalRows = p.CopiedRows, p.TotalRows
		mv.Message = fmt.Sprintf("copying: %d of %d rows", p.CopiedRows, p.TotalRows)
		if th.due(time.Now()) {
			if err := r.writeServerMove(ctx, s, mv, nil); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "writing the progress of a move to another server", "schema", s.schema)
			}
		}
	}
	if err := r.checkMoveTarget(ctx, target, mv); err != nil {
		return r.moveStepFailed(ctx, s, mv, rel, err, url)
	}
	for range moveStepsPerPass {
		next, again, err := r.serverMoveStep(ctx, s, mv, rel)
		if err != nil {
			return r.moveStepFailed(ctx, s, mv, rel, err, url)
		}
		if next {
			s.requeue.at(time.Millisecond)
			return next, nil
		}
		if !again {
			return false, nil
		}
	}
	s.requeue.at(time.Millisecond)
	return false, nil
}

// serverMoveStep runs the step of mv's phase: again when the next phase's
// step may follow in this pass, next when the pass ends and the next one
// comes at once (a slice done, or the switch).
func (r serverMover) serverMoveStep(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation) (next, again bool, err error) {
	bound := r.passTimeout(s)
	dbctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	switch mv.Phase {
	case memoryv1alpha1.ServerMovePreparing:
		if err := rel.Prepare(dbctx); err != nil {
			return false, false, fmt.Errorf("preparing the target: %w", err)
		}
		mv.Phase, mv.Message = memoryv1alpha1.ServerMoveCopying, "copying the tables"
		return false, true, r.movePhaseWritten(ctx, s, mv)
	case memoryv1alpha1.ServerMoveCopying:
		done, p, err := rel.Copy(dbctx)
		if err != nil {
			return false, false, fmt.Errorf("copying the tables: %w", err)
		}
		mv.CopiedRows, mv.TotalRows = p.CopiedRows, p.TotalRows
		if !done {
			mv.Message = fmt.Sprintf("copying: %d of %d rows", p.CopiedRows, p.TotalRows)
			return true, false, r.writeServerMove(ctx, s, mv, nil)
		}
		mv.Phase, mv.Passes = memoryv1alpha1.ServerMoveCatchingUp, 0
		mv.Message = fmt.Sprintf("copied %d rows and built the indexes; catching up", p.CopiedRows)
		return false, true, r.movePhaseWritten(ctx, s, mv)
	case memoryv1alpha1.ServerMoveCatchingUp:
		delta, err := rel.CatchUp(dbctx)
		if err != nil {
			return false, false, fmt.Errorf("catching up: %w", err)
		}
		mv.Passes++
		mv.LastDelta = delta
		mv.Message = fmt.Sprintf("catch-up pass %d applied %d rows", mv.Passes, delta)
		if delta >= moveCatchUpEnough && mv.Passes < moveCatchUpPasses {
			return true, false, r.writeServerMove(ctx, s, mv, nil)
		}
		// The full comparison of both copies, outside the freeze: the
		// verify inside it then compares only the rows changed since this
		// pass's snapshot (tenant.Relocation.CatchUpVerified), and one more
		// pass leaves the freeze the rows written meanwhile.
		if _, _, err := rel.CatchUpVerified(dbctx); err != nil {
			return false, false, fmt.Errorf("catching up and comparing the copies: %w", err)
		}
		if _, err := rel.CatchUp(dbctx); err != nil {
			return false, false, fmt.Errorf("catching up after the comparison: %w", err)
		}
		// Written before the freeze: an operator that dies after it finds
		// the phase, and the provisioning pass leaves the frozen source alone.
		now := metav1.Now()
		mv.Phase, mv.FreezeStartedAt = memoryv1alpha1.ServerMoveFrozen, &now
		mv.Message += "; writes frozen for the last catch-up, verify and switch"
		return false, true, r.movePhaseWritten(ctx, s, mv)
	case memoryv1alpha1.ServerMoveFrozen:
		return r.frozenStep(ctx, s, mv, rel)
	}
	return false, false, fmt.Errorf("status.serverMove.phase %q is no running phase", mv.Phase)
}

// frozenStep freezes the source's writes (again, after a crash), applies
// the last rows, compares both copies, makes the target the tenant's home
// and switches. A freeze that has lasted longer than MoveFreezeTimeout is
// lifted instead and the move catches up again.
func (r serverMover) frozenStep(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation) (next, again bool, err error) {
	started := time.Now()
	if mv.FreezeStartedAt != nil {
		started = mv.FreezeStartedAt.Time
	}
	finished, err := r.targetFinished(ctx, rel)
	if err != nil {
		return false, false, err
	}
	left := r.opts.MoveFreezeTimeout - time.Since(started)
	if finished {
		// Finish ran (an earlier pass that died before its switch, or one
		// whose context ended as Finish committed): the target is this
		// runtime's home-marked copy and its row map is gone, so catching
		// up again is impossible. The source is still frozen (durably):
		// verify and switch, whatever the freeze timeout (review 14, H1).
		left = max(left, r.passTimeout(s))
	}
	if left <= 0 {
		return r.liftFreeze(ctx, s, mv, rel)
	}
	dbctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	if err := rel.Freeze(dbctx); err != nil {
		return r.frozenFailed(ctx, s, mv, rel, fmt.Errorf("freezing the source's writes: %w", err))
	}
	if err := r.failAfter(s, "move source frozen"); err != nil {
		return false, false, err
	}
	r.eventer().normal(s.rt, reasonMoveFrozen, "Move", "writes to schema %s on %s are frozen for the switch (at most %s)", s.schema, mv.From.Via, r.opts.MoveFreezeTimeout)
	var delta int64
	if !finished {
		delta, err = rel.CatchUp(dbctx)
	}
	if err != nil {
		return r.frozenFailed(ctx, s, mv, rel, fmt.Errorf("the last catch-up: %w", err))
	}
	check, err := rel.Verify(dbctx)
	if err != nil {
		return r.frozenFailed(ctx, s, mv, rel, fmt.Errorf("verifying the copy: %w", err))
	}
	if err := rel.Finish(dbctx); err != nil {
		return r.frozenFailed(ctx, s, mv, rel, fmt.Errorf("making the target the tenant's home: %w", err))
	}
	mv.LastDelta = delta
	return true, false, r.switchServerMove(ctx, s, mv, rel, check)
}

// frozenFailed handles a failure while frozen: a definitive one ends the
// move; another is retried while the freeze timeout allows (the source
// stays frozen in between: it is durable).
func (r serverMover) frozenFailed(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation, err error) (bool, bool, error) {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return r.liftFreeze(ctx, s, mv, rel)
	}
	return false, false, err
}

// targetFinished reports whether Finish made the target this runtime's
// home-marked copy (its incoming marker is gone) although the switch is
// not recorded: from then on the freeze must not be lifted, as writes on
// the source could no longer be caught up.
func (r serverMover) targetFinished(ctx context.Context, rel tenant.Relocation) (bool, error) {
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	held, err := tenant.HoldsTenant(dbctx, rel.Target, rel.Schema, rel.Owner, tenant.Claim{})
	if err != nil {
		return false, fmt.Errorf("asking the move's target whether its copy is finished: %w", err)
	}
	return held, nil
}

// liftFreeze lifts a freeze that lasted longer than MoveFreezeTimeout and
// takes the move back to catching up.
func (r serverMover) liftFreeze(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation) (bool, bool, error) {
	if finished, err := r.targetFinished(ctx, rel); err != nil || finished {
		// Past Finish the freeze stays until the switch: the next pass
		// verifies and switches (frozenStep), after the controller's
		// backoff (review 15, M1: not a loop of back-to-back verifies).
		if err == nil {
			err = errors.New("the new copy is finished: writes stay frozen until the verify and the switch succeed")
		}
		return false, false, err
	}
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	if err := rel.Unfreeze(dbctx); err != nil {
		return false, false, fmt.Errorf("lifting a freeze longer than --move-freeze-timeout %s: %w", r.opts.MoveFreezeTimeout, err)
	}
	mv.Phase, mv.Passes, mv.FreezeStartedAt = memoryv1alpha1.ServerMoveCatchingUp, 0, nil
	mv.FreezesLifted++
	mv.Message = fmt.Sprintf("the freeze lasted longer than --move-freeze-timeout %s: writes resumed, catching up again", r.opts.MoveFreezeTimeout)
	r.eventer().warning(s.rt, memoryv1alpha1.ReasonMoveFreezeTooLong, "Move", "%s", mv.Message)
	if mv.FreezesLifted >= memoryv1alpha1.MaxMoveFreezesLifted {
		_, err := r.failServerMove(ctx, s, mv, rel, fmt.Errorf("%d freezes lasted longer than --move-freeze-timeout %s (a transaction of the login role that does not end, or the operator held up)",
			mv.FreezesLifted, r.opts.MoveFreezeTimeout))
		return false, false, err
	}
	return true, false, r.writeServerMove(ctx, s, mv, nil)
}

// switchServerMove is the commit point of a move: one status patch (with
// the optimistic lock) sets phase Switched and status.connection to the
// target. The next pass provisions the target, gives the login role a new
// password and writes <runtime>-db: one rollout of the service. The old
// copy is then marked moved (settleSwitchedMove retries it).
func (r serverMover) switchServerMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation, check tenant.RelocateCheck) error {
	now := metav1.Now()
	if mv.FreezeStartedAt != nil {
		mv.FreezeMillis = now.Sub(mv.FreezeStartedAt.Time).Milliseconds()
	}
	mv.Phase, mv.FinishedAt = memoryv1alpha1.ServerMoveSwitched, &now
	mv.VerifiedRows, mv.Checksum = check.Rows, cutMessage(check.Checksum, 128)
	mv.Message = fmt.Sprintf("switched after %d rows verified in %d tables, writes frozen %d ms; the old copy on %s is kept read-only until the annotation memory.engram.dev/move-confirmed: %q",
		check.Rows, check.Tables, mv.FreezeMillis, mv.From.Via, fmt.Sprint(mv.Run))
	home := mv.To.DeepCopy()
	if err := r.writeServerMove(ctx, s, mv, home); err != nil {
		return fmt.Errorf("switching the tenant to %s: %w", mv.To.Via, err)
	}
	s.facts.moving = movingFact(mv)
	r.eventer().normal(s.rt, memoryv1alpha1.ReasonMoved, "Move", "schema %s moved from %s to %s: %d rows verified, writes frozen %d ms",
		s.schema, mv.From.Via, mv.To.Via, check.Rows, mv.FreezeMillis)
	return r.markSourceMoved(ctx, s, mv, rel)
}

// markSourceMoved marks the old copy moved (pointing the connection back at
// it is then refused); a failure is retried by the next pass.
func (r serverMover) markSourceMoved(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation) error {
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	to := tenant.ServerIdentity{System: mv.To.SystemIdentifier, Database: mv.To.Database, DatabaseOID: mv.To.DatabaseOID}
	if err := rel.MarkMoved(dbctx, to); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "marking the old copy of a moved tenant", "schema", s.schema)
		return nil
	}
	mv.SourceMarked = true
	return r.writeServerMove(ctx, s, mv, nil)
}

// moveStepFailed ends the move for a definitive error, else keeps its
// phase with the error in its message and retries with backoff.
func (r serverMover) moveStepFailed(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation, err error, url string) (bool, error) {
	// Go on from the move as last written: a step may have set the next
	// phase in mv before its write failed (the switch sets Switched before
	// its optimistic-locked patch: a conflict must not let the reconcile's
	// own status patch record a switch without status.connection, review
	// 15, H2).
	if w := s.orig.Status.ServerMove; w != nil && w.Run == mv.Run {
		mv = w.DeepCopy()
	}
	if definitiveMoveError(err) {
		// The target's admin URL too is kept out of status and events
		// (review 14, L7); failServerMove scrubs the source's.
		return r.failServerMove(ctx, s, mv, rel, errors.New(scrubAdmin(err.Error(), url)))
	}
	msg := stableMessage(scrubAdmin(scrubAdmin(err.Error(), s.admin), url))
	if errors.Is(err, tenant.ErrRelocateVersion) {
		mv.Message = cutMessage("waiting for both schemas to reach the same version: "+msg, 1000)
		s.rt.Status.ServerMove = mv
		s.facts.moving = movingFact(mv)
		s.requeue.at(moveReembedRecheck)
		return false, nil
	}
	mv.Message = cutMessage("retrying: "+msg, 1000)
	s.rt.Status.ServerMove = mv
	s.facts.moving = movingFact(mv)
	return false, fmt.Errorf("moving the tenant (phase %s): %s", mv.Phase, msg)
}

// checkMoveTarget fails the move when its target connection reaches
// another server than the one recorded when it started (its Secret was
// edited meanwhile).
func (r serverMover) checkMoveTarget(ctx context.Context, target *pgxpool.Pool, mv *memoryv1alpha1.ServerMoveStatus) error {
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	id, err := tenant.Identify(dbctx, target)
	if err != nil {
		return fmt.Errorf("asking the move's target server which it is: %w", err)
	}
	want := tenant.ServerIdentity{System: mv.To.SystemIdentifier, Database: mv.To.Database, DatabaseOID: mv.To.DatabaseOID}
	// Proven by system identifiers (a move starts only with both), and
	// never the tenant's home: a target connection repointed at the home
	// would verify the home against itself and switch to it (review 15b).
	if !want.Verifiable(id) || !want.Same(id) || moveIdentity(mv.From).Same(id) {
		return fmt.Errorf("%w: %s reached %s, now %s", errMoveTargetChanged, mv.To.Via, want, id)
	}
	return nil
}

// movePhaseWritten writes mv's new phase, then calls the FailAfter test
// seam with "move <phase>" (an operator dying right after the write).
func (r serverMover) movePhaseWritten(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus) error {
	if err := r.writeServerMove(ctx, s, mv, nil); err != nil {
		return err
	}
	return r.failAfter(s, "move "+mv.Phase)
}
