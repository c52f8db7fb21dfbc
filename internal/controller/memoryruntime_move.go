package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// Event reasons of a move.
const (
	reasonMoving     = "Moving"
	reasonMoved      = "Moved"
	reasonMoveFailed = "MoveFailed"
)

// moveToWorker carries out the move-to-worker annotation: when it names a
// Citus worker other than the one holding the schema (status.citusWorker,
// set by provisioning), the schema is moved there with tenant.MoveSchema,
// online, and the outcome recorded in status.citusMove and an event. A
// failed move is tried again after GrantCheckInterval, or at once when the
// annotation changes; a runtime whose schema is where the annotation says
// costs nothing (no database query, no write).
func (r *MemoryRuntimeReconciler) moveToWorker(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	want := strings.TrimSpace(rt.Annotations[naming.AnnotationMoveToWorker])
	if want == "" || want == rt.Status.CitusWorker {
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
	r.eventer().normal(rt, reasonMoving, "Move", "moving schema %s from Citus worker %s to %s", s.schema, mv.From, want)
	dbctx, cancel := context.WithTimeout(ctx, r.passTimeout(s))
	defer cancel()
	res, err := tenant.MoveSchema(dbctx, s.pool, tenant.MoveSpec{Schema: s.schema, Owner: TenantOwner(rt), To: want})
	if err = r.explainPassTimeout(ctx, dbctx, s, err); err != nil {
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

// moveFailed records a failed move; it is retried after GrantCheckInterval.
func (r *MemoryRuntimeReconciler) moveFailed(s *runtimeScope, mv *memoryv1alpha1.CitusMoveStatus, err error) {
	now := metav1.Now()
	mv.Result, mv.FinishedAt = memoryv1alpha1.CitusMoveFailed, &now
	mv.Message = stableMessage(scrubAdmin(err.Error(), s.admin))
	s.rt.Status.CitusMove = mv
	r.eventer().warning(s.rt, reasonMoveFailed, "Move", "%s", mv.Message)
	s.requeue.at(r.opts.GrantCheckInterval)
}
