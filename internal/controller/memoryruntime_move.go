package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// Event reasons of a move.
const (
	reasonMoving     = "Moving"
	reasonMoved      = "Moved"
	reasonMoveFailed = "MoveFailed"
	reasonMoveWaits  = "MoveWaiting"
)

// moveBusyRetry is how soon a move refused because another shard move runs
// on the Citus cluster is tried again: that one ends on its own, in
// seconds to minutes, and nothing needs a human.
const moveBusyRetry = 15 * time.Second

// moveToWorker carries out the move-to-worker annotation: when it names a
// Citus worker other than the one holding the schema (status.citusWorker,
// set by provisioning), the schema is moved there with tenant.MoveSchema,
// online, and the outcome recorded in status.citusMove and an event. A
// failed move is tried again after GrantCheckInterval, or at once when the
// annotation changes; a runtime whose schema is where the annotation says
// costs nothing (no database query, no write).
//
// A move reports itself while it runs: status.citusMove is written Running
// with startedAt in a status patch of its own before the move starts, then
// with the bytes copied at most once per Options.MoveProgressInterval
// (10 s; only when they changed), and the reconcile's final status patch writes the result.
func (r *MemoryRuntimeReconciler) moveToWorker(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	want := strings.TrimSpace(rt.Annotations[naming.AnnotationMoveToWorker])
	if want == "" || want == rt.Status.CitusWorker {
		settleMove(&rt.Status, want, metav1.Now())
		return false, nil
	}
	last := rt.Status.CitusMove
	if last != nil && last.To == want && last.Result == memoryv1alpha1.CitusMoveFailed && last.FinishedAt != nil {
		if wait := r.opts.GrantCheckInterval - time.Since(last.FinishedAt.Time); wait > 0 {
			s.requeue.at(wait)
			return false, nil
		}
	}
	mv := &memoryv1alpha1.CitusMoveStatus{To: want, From: rt.Status.CitusWorker}
	if rt.Status.CitusWorker == "" {
		r.moveFailed(s, mv, errors.New("the database is not a Citus coordinator (status.citusWorker is empty): there is no worker to move to"))
		return false, nil
	}
	th := &moveThrottle{every: r.opts.MoveProgressInterval}
	// Announced once the checks have passed (MoveSpec.Started): a move
	// refused while another runs (retried every moveBusyRetry) writes
	// neither Running nor an event on each try.
	announce := func() {
		r.eventer().normal(rt, reasonMoving, "Move", "moving schema %s from Citus worker %s to %s", s.schema, mv.From, want)
		started := metav1.Now()
		mv.Result, mv.StartedAt = memoryv1alpha1.CitusMoveRunning, &started
		mv.Message = "copying the schema's tables to " + want
		th.last = started.Time
		// A Running that cannot be written is not worth stopping the
		// move for: the final status patch writes the result.
		_ = r.writeMove(ctx, s, mv)
	}
	dbctx, cancel := context.WithTimeout(ctx, r.passTimeout(s))
	defer cancel()
	res, err := tenant.MoveSchema(dbctx, s.pool, tenant.MoveSpec{Schema: s.schema, Owner: TenantOwner(rt), To: want,
		Started: announce, Progress: func(p tenant.MoveProgress) { r.moveProgress(ctx, s, mv, th, p) }})
	if err = r.explainPassTimeout(ctx, dbctx, s, err); errors.Is(err, tenant.ErrMoveInProgress) {
		r.moveWaits(s, mv, last, err)
		return false, nil
	} else if err != nil {
		r.moveFailed(s, mv, err)
		return false, nil
	}
	now := metav1.Now()
	mv.Result, mv.FinishedAt = memoryv1alpha1.CitusMoveSucceeded, &now
	mv.Message = fmt.Sprintf("moved in %s", res.Duration.Round(time.Millisecond))
	rt.Status.CitusMove = mv
	rt.Status.CitusWorker = res.To
	r.eventer().normal(rt, reasonMoved, "Move", "schema %s moved from %s to %s in %s", s.schema, res.From, res.To, res.Duration.Round(time.Millisecond))
	return false, nil
}

// settleMove ends a move status.citusMove still shows as Running or
// Waiting when nothing is to be moved any more (want, the annotation, is
// empty or the worker the schema is on): the operator stopped while it ran
// and Citus finished it (Succeeded), or the annotation was removed before
// it ran or ended (Failed, the schema where status.citusWorker says).
// Without it, a move the operator lost sight of would show Running for good.
func settleMove(st *memoryv1alpha1.MemoryRuntimeStatus, want string, now metav1.Time) {
	mv := st.CitusMove
	if mv == nil || mv.FinishedAt != nil || (mv.Result != memoryv1alpha1.CitusMoveRunning && mv.Result != memoryv1alpha1.CitusMoveWaiting) {
		return
	}
	mv = mv.DeepCopy()
	mv.FinishedAt = &now
	if mv.To == st.CitusWorker && want != "" {
		mv.Result, mv.Message = memoryv1alpha1.CitusMoveSucceeded, "the schema is on "+mv.To+": the move ended while the operator was not following it"
	} else {
		mv.Result, mv.Message = memoryv1alpha1.CitusMoveFailed, "the move-to-worker annotation no longer asks for "+mv.To+"; the schema is on "+st.CitusWorker
	}
	st.CitusMove = mv
}

// moveFailed records a failed move; it is retried after GrantCheckInterval.
func (r *MemoryRuntimeReconciler) moveFailed(s *runtimeScope, mv *memoryv1alpha1.CitusMoveStatus, err error) {
	now := metav1.Now()
	mv.Result, mv.FinishedAt = memoryv1alpha1.CitusMoveFailed, &now
	mv.Message = stableMessage(scrubAdmin(err.Error(), s.admin))
	s.rt.Status.CitusMove = mv
	r.eventer().warning(s.rt, reasonMoveFailed, "Move", "%s", mv.Message)
	s.requeue.at(r.opts.GrantCheckInterval)
}

// moveWaits records a move refused because another shard move runs on the
// Citus cluster: Waiting, tried again after moveBusyRetry, with one event
// per wait (not one per retry).
func (r *MemoryRuntimeReconciler) moveWaits(s *runtimeScope, mv, last *memoryv1alpha1.CitusMoveStatus, err error) {
	mv.Result = memoryv1alpha1.CitusMoveWaiting
	mv.Message = stableMessage(scrubAdmin(err.Error(), s.admin)) + fmt.Sprintf("; tried again every %s", moveBusyRetry)
	s.rt.Status.CitusMove = mv
	if last == nil || last.Result != memoryv1alpha1.CitusMoveWaiting || last.To != mv.To {
		r.eventer().normal(s.rt, reasonMoveWaits, "Move", "%s", mv.Message)
	}
	s.requeue.at(moveBusyRetry)
}

// moveThrottle decides which progress readings of a move are written.
type moveThrottle struct {
	every time.Duration
	last  time.Time // the last status write of this move
	sent  tenant.MoveProgress
}

// due reports whether p, read at now, is written: every has passed since
// the last write and p differs from what was written.
func (th *moveThrottle) due(now time.Time, p tenant.MoveProgress) bool {
	if p == th.sent || now.Sub(th.last) < th.every {
		return false
	}
	th.last, th.sent = now, p
	return true
}

// moveProgress writes a progress reading of the running move, when the
// throttle lets it. It runs on MoveSchema's progress goroutine while the
// reconcile waits in MoveSchema, which returns only after the last call: s
// is not touched by both at once. A failed write is logged; the move goes on.
func (r *MemoryRuntimeReconciler) moveProgress(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.CitusMoveStatus, th *moveThrottle, p tenant.MoveProgress) {
	if !th.due(time.Now(), p) {
		return
	}
	mv.CopiedBytes, mv.TotalBytes = p.Copied, p.Total
	mv.Message = fmt.Sprintf("copying to %s: %s of %s", mv.To, formatBytes(p.Copied), formatBytes(p.Total))
	if err := r.writeMove(ctx, s, mv); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "writing the progress of a Citus move", "schema", s.schema)
	}
}

// writeMove writes status.citusMove at once, in a status patch of its own
// (as recordPlacement does): a running move shows while the reconcile
// waits for it. The reconcile's final status patch then sends only what
// changed since.
func (r *MemoryRuntimeReconciler) writeMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.CitusMoveStatus) error {
	obj := s.orig.DeepCopy()
	obj.Status.CitusMove = mv.DeepCopy()
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(s.orig), client.FieldOwner(naming.FieldOwner)); err != nil {
		return fmt.Errorf("writing status.citusMove (%s to %s): %w", mv.Result, mv.To, err)
	}
	s.orig.Status.CitusMove = mv.DeepCopy()
	s.rt.Status.CitusMove = mv.DeepCopy()
	// The final patch names the latest version (see ensureFinalizer).
	s.rt.ResourceVersion = obj.ResourceVersion
	return nil
}
