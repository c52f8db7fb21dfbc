package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// writeServerMove writes status.serverMove at once, in a status patch of
// its own (as writeMove does), and status.connection with it when home is
// set (the switch). Every such patch carries the optimistic lock: a move's
// status is never written over one the operator has not seen.
func (r serverMover) writeServerMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, home *memoryv1alpha1.RuntimeConnection) error {
	base := s.orig.DeepCopy()
	base.ResourceVersion = s.rt.ResourceVersion
	obj := base.DeepCopy()
	obj.Status.ServerMove = mv.DeepCopy()
	if home != nil {
		obj.Status.Connection = home.DeepCopy()
	}
	if err := r.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(naming.FieldOwner)); err != nil {
		return fmt.Errorf("writing status.serverMove (phase %s): %w", mv.Phase, err)
	}
	s.orig.Status.ServerMove = mv.DeepCopy()
	s.rt.Status.ServerMove = mv.DeepCopy()
	if home != nil {
		s.orig.Status.Connection = home.DeepCopy()
		s.rt.Status.Connection = home.DeepCopy()
	}
	s.rt.ResourceVersion = obj.ResourceVersion
	return nil
}

// serverMoveThrottle lets a progress write of the bulk copy through at most
// once per every.
type serverMoveThrottle struct {
	every time.Duration
	last  time.Time
}

func (th *serverMoveThrottle) due(now time.Time) bool {
	if now.Sub(th.last) < th.every {
		return false
	}
	th.last = now
	return true
}

// relocationSpec is how the target is provisioned: as provision would
// provision the tenant there.
func (r serverMover) relocationSpec(ctx context.Context, s *runtimeScope) (tenant.Spec, error) {
	rt := s.rt
	text, err := r.textSearchConfig(ctx, rt)
	if err != nil {
		return tenant.Spec{}, err
	}
	return tenant.Spec{
		Schema:           s.schema,
		Dimensions:       int(recordedDimensions(rt)),
		Owner:            TenantOwner(rt),
		Claim:            TenantClaim(rt, s.recorded, s.schema),
		IndexTimeout:     r.passTimeout(s),
		Connections:      tenant.ConnectionPolicy{Share: r.opts.TenantConnectionShare, Need: connectionNeed(rt)},
		TempFileLimit:    r.opts.TenantTempFileLimit,
		TextSearchConfig: text,
	}, nil
}

// settleSwitchedMove finishes what follows a switch: the old copy marked
// moved (retried until it is), and the move-confirmed annotation naming
// the run: with reclaimPolicy Delete the old copy is dropped, with Retain
// it is kept and the message says where.
func (r serverMover) settleSwitchedMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus) error {
	rt := s.rt
	confirmed := strings.TrimSpace(rt.Annotations[naming.AnnotationMoveConfirmed]) == strconv.Itoa(int(mv.Run))
	if mv.SourceMarked && !confirmed {
		return nil
	}
	rel := r.relocationBase(s)
	source, url, err := r.viaPool(ctx, rt, mv.From.Via)
	if err != nil {
		if confirmed && reasonOf(err, "") == memoryv1alpha1.ReasonConnectionSecretNotFound {
			return r.confirmServerMove(ctx, s, mv, fmt.Sprintf("its connection %s is gone, so the old copy (schema %s on %s) was left as it is: drop it by hand", mv.From.Via, s.schema, mv.From.Database))
		}
		return fmt.Errorf("reaching the moved tenant's old server: %w", err)
	}
	// After the switch this pass runs on the target (status.connection).
	rel = withPools(rel, source, nil)
	if s.connID == mv.To.Via {
		rel.Target = s.pool
	}
	if !mv.SourceMarked {
		if err := r.markSourceMoved(ctx, s, mv, rel); err != nil {
			return err
		}
		if !mv.SourceMarked {
			return fmt.Errorf("marking the old copy of schema %s on %s as moved failed; retrying", s.schema, mv.From.Via)
		}
	}
	if !confirmed {
		return nil
	}
	if rt.ReclaimPolicyOrDefault() != memoryv1alpha1.ReclaimDelete {
		return r.confirmServerMove(ctx, s, mv, fmt.Sprintf(
			"reclaimPolicy Retain: the old copy, schema %s on %s (database %s, reached through %s), is kept read-only and marked moved; drop it by hand (DROP SCHEMA %s CASCADE and its roles) when it is no longer needed",
			s.schema, mv.From.SystemIdentifier, mv.From.Database, mv.From.Via, s.schema))
	}
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	if err := rel.DropMoved(dbctx); err != nil {
		return fmt.Errorf("dropping the old copy of schema %s on %s: %s", s.schema, mv.From.Via, scrubAdmin(err.Error(), url))
	}
	return r.confirmServerMove(ctx, s, mv, fmt.Sprintf("reclaimPolicy Delete: the old copy, schema %s and its roles on %s, was dropped", s.schema, mv.From.Via))
}

// confirmServerMove records the confirmation of a switched move.
func (r serverMover) confirmServerMove(ctx context.Context, s *runtimeScope, mv *memoryv1alpha1.ServerMoveStatus, what string) error {
	mv.Phase = memoryv1alpha1.ServerMoveConfirmed
	mv.Message = cutMessage("confirmed; "+what, 1000)
	if err := r.writeServerMove(ctx, s, mv, nil); err != nil {
		return err
	}
	r.eventer().normal(s.rt, reasonMoveConfirm, "Move", "run %d: %s", mv.Run, mv.Message)
	return nil
}

// provisionUnlessFrozen is the provisioning phase, skipped while a move
// holds the source's writes frozen: provisioning gives the login role its
// grants back and would undo the freeze. It also records the connection a
// known-ready tenant is provisioned through (status.connection.via) when
// a status from an earlier release lacks it.
func (r serverMover) provisionUnlessFrozen(ctx context.Context, s *runtimeScope) (bool, error) {
	if mv := s.rt.Status.ServerMove; mv != nil && mv.Phase == memoryv1alpha1.ServerMoveFrozen {
		reassertReady(s, r.memory.get(s.rt.UID))
		return false, nil
	}
	stop, err := r.provision(ctx, s)
	if c := s.rt.Status.Connection; err == nil && !stop && c != nil && c.Via == "" &&
		strings.Contains(r.memory.get(s.rt.UID).fingerprint, "|"+s.connID+"|") {
		c.Via = s.connID
	}
	return stop, err
}

// movedAway reports whether the <runtime>-db Secret live still names
// another server than the admin connection's after a move switched: the
// login role on the new server then gets a new password (the old one is
// the old server's), and the Secret names the new server.
func movedAway(s *runtimeScope, live *corev1.Secret) bool {
	mv := s.rt.Status.ServerMove
	if mv == nil || (mv.Phase != memoryv1alpha1.ServerMoveSwitched && mv.Phase != memoryv1alpha1.ServerMoveConfirmed) || live == nil || live.Data == nil {
		return false
	}
	want, err := specs.LoginCredentials(s.admin, s.schema, "-")
	if err != nil {
		return false
	}
	return string(live.Data[naming.KeyHost]) != want.Host || string(live.Data[naming.KeyPort]) != want.Port ||
		string(live.Data[naming.KeyDBName]) != want.DBName
}

// reclaimServerMove is what deleting a runtime does to a move's copies
// besides the tenant's home (which follows reclaimPolicy as always, through
// connectionID: a running move's source): the incoming copy of a running
// move is dropped (it is ours and useless), and the source's freeze is
// lifted when it is kept; with reclaimPolicy Delete the old copy of a
// switched, unconfirmed move is dropped too.
func (r serverMover) reclaimServerMove(ctx context.Context, s *runtimeScope, schema string) error {
	rt := s.rt
	mv := rt.Status.ServerMove
	if mv == nil || rt.UsesMemoryDatabase() {
		return nil
	}
	s.schema = schema
	dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
	defer cancel()
	gone := func(err error) bool { return reasonOf(err, "") == memoryv1alpha1.ReasonConnectionSecretNotFound }
	source, surl, serr := r.viaPool(ctx, rt, mv.From.Via)
	if serr != nil && !gone(serr) {
		return serr
	}
	switch {
	case memoryv1alpha1.ServerMoveRunning(mv.Phase):
		target, url, err := r.viaPool(ctx, rt, mv.To.Via)
		if err != nil && !gone(err) {
			return err
		}
		rel := withPools(r.relocationBase(s), source, target)
		if target != nil {
			err := rel.DropUnswitched(dbctx, moveIdentity(mv.From), moveIdentity(mv.To))
			if errors.Is(err, tenant.ErrRelocateNotIncoming) {
				// Not the move's copy on the move's target (the connection
				// was repointed): never dropped; the deletion goes on.
				ctrl.LoggerFrom(ctx).Info("deleting a runtime mid-move: its target copy was left", "schema", s.schema, "reason", err.Error())
				err = nil
			}
			if err != nil {
				return fmt.Errorf("dropping the incoming copy of a move on %s: %s", mv.To.Via, scrubAdmin(err.Error(), url))
			}
		}
		if source == nil || rt.ReclaimPolicyOrDefault() == memoryv1alpha1.ReclaimDelete {
			return nil
		}
		if err := rel.Unfreeze(dbctx); err != nil {
			return fmt.Errorf("lifting a move's freeze on %s: %s", mv.From.Via, scrubAdmin(err.Error(), surl))
		}
	case mv.Phase == memoryv1alpha1.ServerMoveSwitched && rt.ReclaimPolicyOrDefault() == memoryv1alpha1.ReclaimDelete && source != nil:
		rel := withPools(r.relocationBase(s), source, nil)
		url := surl
		if !mv.SourceMarked {
			// Deleted after the switch but before the old copy was marked
			// moved (review 14, L6): DropMoved drops only a moved copy.
			to := tenant.ServerIdentity{System: mv.To.SystemIdentifier, Database: mv.To.Database, DatabaseOID: mv.To.DatabaseOID}
			if err := rel.MarkMoved(dbctx, to); err != nil {
				return fmt.Errorf("marking the old copy of a moved tenant on %s: %s", mv.From.Via, scrubAdmin(err.Error(), url))
			}
		}
		if err := rel.DropMoved(dbctx); err != nil {
			return fmt.Errorf("dropping the old copy of a moved tenant on %s: %s", mv.From.Via, scrubAdmin(err.Error(), url))
		}
	}
	return nil
}
