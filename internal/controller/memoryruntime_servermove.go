package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// Event reasons of a move to another server (issue 29).
const (
	reasonMoveStarted  = "MoveStarted"
	reasonMoveFrozen   = "MoveFrozen"
	reasonMoveAborted  = "MoveAborted"
	reasonMoveRefused  = "MoveRefused"
	reasonMoveRenamed  = "MoveConnectionRenamed"
	reasonMoveConfirm  = "MoveConfirmed"
	moveCatchUpEnough  = 2000 // a catch-up pass that applies fewer rows is followed by the freeze
	moveCatchUpPasses  = 5    // ... and so is the fifth pass, whatever it applied
	moveReembedRecheck = time.Minute
	moveStaleRetry     = 200 * time.Millisecond
)

// staleRuntime reports whether the runtime this reconcile read is older
// than the API server's (an uncached read).
func (r serverMover) staleRuntime(ctx context.Context, s *runtimeScope) (bool, error) {
	var live memoryv1alpha1.MemoryRuntime
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(s.rt), &live); err != nil {
		return false, fmt.Errorf("reading the runtime before a move step: %w", err)
	}
	return live.ResourceVersion != s.rt.ResourceVersion, nil
}

// reconcileServerMove carries out spec.database.onChange: Move (issue 29).
// It runs last in the reconcile: the normal pass has run on the tenant's
// current server (moveSourceVia) before. Each pass does one bounded slice
// of the move (Options.MoveSlice) and comes back at once; every step is
// idempotent and the phase is written to status.serverMove before the step
// acts on a database, so an operator that dies anywhere resumes it.
func (r serverMover) reconcileServerMove(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	mv := rt.Status.ServerMove
	target, wanted := moveTarget(rt)
	if wanted || (mv != nil && (memoryv1alpha1.ServerMoveRunning(mv.Phase) || mv.Phase == memoryv1alpha1.ServerMoveSwitched)) {
		// The pass that follows a move's status write comes at once, often
		// before the cache has that write: a move acts only on the status
		// it last wrote (every write carries the optimistic lock too).
		if stale, err := r.staleRuntime(ctx, s); err != nil || stale {
			s.requeue.at(moveStaleRetry)
			return false, err
		}
	}
	if mv != nil && memoryv1alpha1.ServerMoveRunning(mv.Phase) {
		if !wanted || target != mv.To.Via {
			return r.abortServerMove(ctx, s, mv.DeepCopy())
		}
		return r.runServerMove(ctx, s, mv.DeepCopy())
	}
	if mv != nil && mv.Phase == memoryv1alpha1.ServerMoveSwitched {
		if err := r.settleSwitchedMove(ctx, s, mv.DeepCopy()); err != nil {
			return false, err
		}
		mv = rt.Status.ServerMove
	}
	s.facts.moving = movingFact(mv)
	if !wanted {
		return false, nil
	}
	return r.startServerMove(ctx, s, target, mv)
}

// startServerMove checks that the move spec.database asks for can be done,
// and writes its intent (phase Preparing) before anything is created on
// the target; refused, it says why (condition Moving) and touches nothing.
func (r serverMover) startServerMove(ctx context.Context, s *runtimeScope, target string, last *memoryv1alpha1.ServerMoveStatus) (bool, error) {
	rt := s.rt
	if re := rt.Status.Reembed; re != nil && (re.Phase == memoryv1alpha1.ReembedFilling || re.Phase == memoryv1alpha1.ReembedPaused) {
		r.refuseMove(s, memoryv1alpha1.ReasonMoveWaitsForReembed, fmt.Sprintf(
			"the move to %s waits for the re-embed under way (status.reembed %s) to switch or be aborted", target, re.Phase))
		s.requeue.at(moveReembedRecheck)
		return false, nil
	}
	if rt.Status.CitusWorker != "" {
		r.refuseMove(s, memoryv1alpha1.ReasonMoveUnsupported, "the tenant is on a Citus coordinator: a move to another server is not supported there (move it between workers with the move-to-worker annotation)")
		return false, nil
	}
	if last != nil && last.Phase == memoryv1alpha1.ServerMoveSwitched {
		r.refuseMove(s, memoryv1alpha1.ReasonMoveUnsupported, fmt.Sprintf(
			"the last move (run %d) switched but is not confirmed: its old copy on %s must be confirmed first (annotation memory.engram.dev/move-confirmed: %q)",
			last.Run, last.From.Via, fmt.Sprint(last.Run)))
		return false, nil
	}
	if last != nil && last.Phase == memoryv1alpha1.ServerMoveFailed && last.To.Via == target && last.FinishedAt != nil {
		if wait := r.opts.GrantCheckInterval - time.Since(last.FinishedAt.Time); wait > 0 {
			s.requeue.at(wait)
			return false, nil
		}
	}
	home := rt.Status.Connection
	if home == nil || s.connID != home.Via {
		return false, nil // the normal pass has not proven the tenant's home through its connection yet
	}
	pool, url, err := r.viaPool(ctx, rt, target)
	if err != nil {
		r.refuseMove(s, memoryv1alpha1.ReasonMoveFailed, "the move cannot reach its target: "+stableMessage(scrubAdmin(err.Error(), url)))
		s.requeue.at(r.opts.GrantCheckInterval)
		return false, nil
	}
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	id, err := tenant.Identify(dbctx, pool)
	if err != nil {
		r.refuseMove(s, memoryv1alpha1.ReasonMoveFailed, "asking the target server which it is: "+stableMessage(scrubAdmin(err.Error(), url)))
		return false, fmt.Errorf("asking the move's target server which it is: %w", err)
	}
	from := tenant.ServerIdentity{System: home.SystemIdentifier, Database: home.Database, DatabaseOID: home.DatabaseOID}
	if from.Same(id) && from.Verifiable(id) {
		// Another connection to the same database (a renamed Secret): no
		// move, the tenant's connection is now this one.
		rt.Status.Connection.Via = target
		r.eventer().normal(rt, reasonMoveRenamed, "Move", "%s reaches the tenant's own server and database %s: recorded as its connection, nothing to move", target, id)
		s.requeue.at(time.Millisecond)
		return false, nil
	}
	if !from.Verifiable(id) {
		// Without both system identifiers two servers cannot be told apart
		// for sure (fresh servers number their databases alike): every
		// later step that must know which server it is on (the target
		// check, dropping an unswitched copy) could take the tenant's home
		// for the target (review 15b).
		r.refuseMove(s, memoryv1alpha1.ReasonMoveUnsupported, fmt.Sprintf(
			"a move needs the system identifier of both servers (pg_control_system()) and the operator's role cannot read it on %s: "+
				"grant it EXECUTE ON FUNCTION pg_control_system() (or pg_monitor) there, or move the tenant by hand (docs/export.md)",
			map[bool]string{true: "the target", false: "the tenant's server"}[from.System != ""]))
		return false, nil
	}
	if from.System == id.System {
		r.refuseMove(s, memoryv1alpha1.ReasonMoveUnsupported, fmt.Sprintf(
			"%s reaches another database (%s) of the tenant's own server: roles are server-wide, so a move within one server is not supported; point spec.database back at %s",
			target, id.Database, home.Via))
		return false, nil
	}
	run := int32(1)
	if last != nil {
		run = last.Run + 1
	}
	now := metav1.Now()
	mv := &memoryv1alpha1.ServerMoveStatus{
		Run: run, From: *home.DeepCopy(), Phase: memoryv1alpha1.ServerMovePreparing, StartedAt: &now,
		To:      memoryv1alpha1.RuntimeConnection{SystemIdentifier: id.System, Database: id.Database, DatabaseOID: id.DatabaseOID, Via: target},
		Message: "preparing the tenant's schema on " + id.String(),
	}
	if err := r.movePhaseWritten(ctx, s, mv); err != nil {
		return false, err
	}
	r.eventer().normal(rt, reasonMoveStarted, "Move", "moving schema %s (run %d) from %s (%s) to %s (%s)", s.schema, run, home.Via, from, target, id)
	return r.runServerMove(ctx, s, mv)
}

// refuseMove says why the move spec.database asks for is not done
// (condition Moving False), with one Warning per new refusal.
func (r serverMover) refuseMove(s *runtimeScope, reason, msg string) {
	s.facts.moving = &movingCondition{reason: reason, message: msg}
	if c := s.rt.GetCondition(memoryv1alpha1.ConditionMoving); c == nil || c.Reason != reason {
		r.eventer().warning(s.rt, reasonMoveRefused, "Move", "%s", msg)
	}
}

// abortServerMove ends a move spec.database no longer asks for, before its
// switch: writes resume on the source and the incoming copy is dropped
// from the target. The service never left the source.
func (r serverMover) abortServerMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus) (bool, error) {
	target, url, terr := r.viaPool(ctx, s.rt, mv.To.Via)
	rel := withPools(r.relocationBase(s), s.pool, target)
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	if err := rel.Unfreeze(dbctx); err != nil {
		return false, fmt.Errorf("aborting the move: lifting the freeze on the source: %w", err)
	}
	left := ""
	err := terr
	if err == nil {
		err = rel.DropUnswitched(dbctx, moveIdentity(mv.From), moveIdentity(mv.To))
	}
	switch {
	case err == nil:
	case errors.Is(err, tenant.ErrRelocateNotIncoming):
		// The target connection no longer reaches the move's target (or a
		// copy there is not one this runtime may drop): nothing is dropped.
		left = fmt.Sprintf("; the target copy was not dropped (%s): check %s and drop schema %s there by hand if it is the move's copy",
			stableMessage(scrubAdmin(err.Error(), url)), mv.To.Via, s.schema)
	case reasonOf(err, "") == memoryv1alpha1.ReasonConnectionSecretNotFound || reasonOf(err, "") == memoryv1alpha1.ReasonConnectionInvalid:
		left = fmt.Sprintf("; the target connection %s is gone, so the incoming copy of schema %s on %s (marked incoming) was left: drop it by hand", mv.To.Via, s.schema, mv.To.Database)
	default:
		return false, fmt.Errorf("aborting the move: dropping the incoming copy on the target: %s", scrubAdmin(err.Error(), url))
	}
	now := metav1.Now()
	mv.Phase, mv.FinishedAt, mv.FreezeStartedAt = memoryv1alpha1.ServerMoveAborted, &now, nil
	mv.Message = cutMessage("spec.database no longer names "+mv.To.Via+": the move was aborted before its switch, writes go on on "+mv.From.Via+left, 1000)
	s.rt.Status.ServerMove = mv
	s.facts.moving = movingFact(mv)
	r.eventer().normal(s.rt, reasonMoveAborted, "Move", "%s", mv.Message)
	s.requeue.at(time.Millisecond) // the next pass uses spec.database's connection
	return false, nil
}

// failServerMove ends a move that cannot go on (a refusal of the target,
// copies that differ, a target that is another server now): writes resume
// on the source, the incoming copy is dropped, and a new run starts after
// GrantCheckInterval while spec.database still asks for the move.
func (r serverMover) failServerMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, rel tenant.Relocation, cause error) (bool, error) {
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	if err := rel.Unfreeze(dbctx); err != nil {
		return false, fmt.Errorf("ending a failed move (%v): lifting the freeze on the source: %w", cause, err)
	}
	drop := ""
	if err := rel.DropUnswitched(dbctx, moveIdentity(mv.From), moveIdentity(mv.To)); err != nil && !errors.Is(err, tenant.ErrRelocateNotIncoming) {
		drop = "; dropping the incoming copy failed too: " + err.Error()
	}
	now, phase := metav1.Now(), mv.Phase
	mv.Phase, mv.FinishedAt, mv.FreezeStartedAt = memoryv1alpha1.ServerMoveFailed, &now, nil
	mv.Message = cutMessage(fmt.Sprintf("the move failed in phase %s, the tenant stays on %s (tried again after %s): %s%s",
		phase, mv.From.Via, r.opts.GrantCheckInterval, stableMessage(scrubAdmin(cause.Error(), s.admin)), drop), 1000)
	s.rt.Status.ServerMove = mv
	s.facts.moving = movingFact(mv)
	r.eventer().warning(s.rt, memoryv1alpha1.ReasonMoveFailed, "Move", "%s", mv.Message)
	s.requeue.at(r.opts.GrantCheckInterval)
	return false, nil
}

// definitiveMoveError reports whether err ends a move (failServerMove)
// rather than being retried in the same phase.
func definitiveMoveError(err error) bool {
	for _, e := range []error{tenant.ErrRelocateSameServer, tenant.ErrRelocateCitus, tenant.ErrRelocateSchemaMismatch,
		tenant.ErrRelocateMismatch, tenant.ErrOwnedByOther, tenant.ErrNotManaged, errMoveTargetChanged} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

var errMoveTargetChanged = errors.New("the move's target connection reaches another server than when the move started")

// relocationBase is the Relocation of s's tenant without its pools.
func (r serverMover) relocationBase(s *runtimeScope) tenant.Relocation {
	rt := s.rt
	return tenant.Relocation{Schema: s.schema, Owner: TenantOwner(rt), Claim: TenantClaim(rt, s.recorded, s.schema), Budget: r.opts.MoveSlice}
}

// withPools sets the pools of rel. A Relocation needs both; when one
// cannot be had (its connection Secret is gone), the other stands in for
// it, and only the steps on the one that is there (Unfreeze, MarkMoved,
// DropMoved on the source; DropIncoming on the target) may be called.
func withPools(rel tenant.Relocation, source, target *pgxpool.Pool) tenant.Relocation {
	if source == nil {
		source = target
	}
	if target == nil {
		target = source
	}
	rel.Source, rel.Target = source, target
	return rel
}

// movingCondition is the Moving condition a reconcile observed.
type movingCondition struct {
	status          bool
	reason, message string
}

// movingFact is the Moving condition of the move mv (nil: none ever).
func movingFact(mv *memoryv1alpha1.ServerMoveStatus) *movingCondition {
	if mv == nil {
		return nil
	}
	msg := fmt.Sprintf("run %d, %s → %s: %s", mv.Run, mv.From.Via, mv.To.Via, mv.Message)
	switch mv.Phase {
	case memoryv1alpha1.ServerMoveSwitched:
		return &movingCondition{reason: memoryv1alpha1.ReasonMoved, message: msg}
	case memoryv1alpha1.ServerMoveConfirmed:
		return &movingCondition{reason: memoryv1alpha1.ReasonMoveConfirmed, message: msg}
	case memoryv1alpha1.ServerMoveAborted:
		return &movingCondition{reason: memoryv1alpha1.ReasonMoveAborted, message: msg}
	case memoryv1alpha1.ServerMoveFailed:
		return &movingCondition{reason: memoryv1alpha1.ReasonMoveFailed, message: msg}
	}
	return &movingCondition{status: true, reason: memoryv1alpha1.ReasonMoveInProgress, message: "phase " + mv.Phase + ", " + msg}
}

// moveIdentity is the server identity a move recorded for one of its ends.
func moveIdentity(end memoryv1alpha1.RuntimeConnection) tenant.ServerIdentity {
	return tenant.ServerIdentity{System: end.SystemIdentifier, Database: end.Database, DatabaseOID: end.DatabaseOID}
}
