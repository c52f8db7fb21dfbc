package controller

import (
	"context"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// blockerPolicy is the tenant.BlockerPolicy of one provisioning of the
// runtime of s: another tenant's session that blocks it for longer than
// --tenant-blocker-max-age is ended, and each blocker reported becomes a
// Warning event (reportBlocker).
func (r *MemoryRuntimeReconciler) blockerPolicy(ctx context.Context, s *runtimeScope) tenant.BlockerPolicy {
	// Reports come from the watcher's goroutine while the reconcile keeps
	// building s.rt's status: events are recorded on a copy.
	regarding := s.rt.DeepCopy()
	schema, admin := s.schema, s.admin
	lines := &reapLines{} // the watcher's goroutine alone uses it
	return tenant.BlockerPolicy{MaxAge: r.opts.TenantBlockerMaxAge,
		Report: func(b tenant.Blocker) {
			r.reportBlockerLine(ctx, regarding, schema, admin, b, lines)
		},
		LookDone: func() {
			blockerLookDone(ctx, schema, lines)
		}}
}

// blockerLookDone logs in one line the blockers of a look past
// maxReapLinesPerLook of an outcome, and starts the next look's count. A
// tenant-run server names up to 10,000 blockers a look with new pids each
// time: a line (and a Warning) each was up to 10,000 a look (issue 26,
// twelfth review, L2).
func blockerLookDone(ctx context.Context, schema string, lines *reapLines) {
	if lines.endedMore > 0 || lines.failedMore > 0 {
		ctrl.LoggerFrom(ctx).Info("more sessions in the way of the provisioning than logged one by one",
			"schema", schema, "endedNotLogged", lines.endedMore, "keptNotLogged", lines.failedMore)
	}
	*lines = reapLines{}
}

// reportBlocker records a blocker: a Warning on the runtime being
// provisioned, and, when the operator ended the session of another
// tenant's login role, a Warning on that tenant's runtime too (found by the
// namespace/name of the role's marker, and only if its UID matches).
func (r *MemoryRuntimeReconciler) reportBlocker(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime, schema, admin string, b tenant.Blocker) {
	r.reportBlockerLine(ctx, rt, schema, admin, b, &reapLines{})
}

// reportBlockerLine is reportBlocker within a look: past
// maxReapLinesPerLook of an outcome, the blocker is counted in lines
// instead of logged (and, kept, instead of a Warning on the runtime being
// provisioned); the metric and the Warning on the ended session's runtime
// still count each.
func (r *MemoryRuntimeReconciler) reportBlockerLine(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime, schema, admin string, b tenant.Blocker, lines *reapLines) {
	log := ctrl.LoggerFrom(ctx).WithValues("schema", schema, "pid", b.PID, "openFor", b.OpenFor.String())
	who := scrubAdmin(b.String(), admin)
	open := b.OpenFor.Round(100 * time.Millisecond)
	if !b.Ended {
		tenantBlockers.WithLabelValues("kept").Inc()
		if lines.failed++; lines.failed > maxReapLinesPerLook {
			lines.failedMore++
			return
		}
		log.Info("provisioning waits for a session it does not end", "blocker", who, "problem", b.Problem)
		r.eventer().warning(rt, memoryv1alpha1.ReasonProvisioningBlocked, "Provision",
			"provisioning schema %s waits for %s, in the way for %s: %s", schema, who, open, b.Problem)
		return
	}
	tenantBlockers.WithLabelValues("ended").Inc()
	if lines.ended++; lines.ended > maxReapLinesPerLook {
		lines.endedMore++
	} else {
		log.Info("ended another tenant's session that blocked provisioning", "blocker", who)
		r.eventer().warning(rt, memoryv1alpha1.ReasonTenantBlockerEnded, "Provision",
			"ended %s: its transaction had been open %s and blocked the provisioning of schema %s (--tenant-blocker-max-age %s)",
			who, open, schema, r.opts.TenantBlockerMaxAge)
	}
	if other := eventRuntime(ctx, r.client, r.pools, b.Tenant, r.pools.address(connectionID(rt))); other != nil {
		r.eventer().warning(other, memoryv1alpha1.ReasonTransactionEnded, "Terminate",
			"the operator ended session %d of this runtime's login role %s: its transaction had been open %s and blocked the provisioning of MemoryRuntime %s/%s; a tenant's transaction may block another tenant's provisioning for at most %s",
			b.PID, b.Role, open, rt.Namespace, rt.Name, r.opts.TenantBlockerMaxAge)
	}
}

// eventRuntime is the one check before the operator records an event
// about a session it found on the database at addr (the transaction
// reaper, the lock watchdog, the provisioning watcher): the MemoryRuntime
// the session's ownership marker names, only if it exists, carries the
// marker's UID and its own connection reaches addr. A server reached
// through a tenant's own connection Secret may show sessions with any
// marker: they never make the operator write events on other tenants'
// runtimes.
func eventRuntime(ctx context.Context, c client.Reader, pools *poolCache, o tenant.Owner, addr string) *memoryv1alpha1.MemoryRuntime {
	rt := runtimeOfOwner(ctx, c, o)
	if rt == nil || addr == "" || pools.address(connectionID(rt)) != addr {
		return nil
	}
	return rt
}

// eventRuntimeOnServer is eventRuntime for a session of the whole server
// at addr (host:port/database): the lock watchdog's, whose lock table and
// sessions are the server's, not one database's. The runtime's own
// connection must reach the same host:port, any database: when the
// operator manages two databases of one server, the watchdog of either may
// end a role's sessions first, and the runtime must hear of it (issue 26's
// fourth review).
func eventRuntimeOnServer(ctx context.Context, c client.Reader, pools *poolCache, o tenant.Owner, addr string) *memoryv1alpha1.MemoryRuntime {
	rt := runtimeOfOwner(ctx, c, o)
	if rt == nil || addr == "" || serverOf(pools.address(connectionID(rt))) != serverOf(addr) {
		return nil
	}
	return rt
}

// serverOf is host:port of an address host:port/database.
func serverOf(addr string) string {
	server, _, _ := strings.Cut(addr, "/")
	return server
}

// runtimeOfOwner returns the MemoryRuntime an ownership marker names, if it
// exists and carries the marker's UID.
// Without a reader (a node job started without the cluster, as tests of
// the database side do) there is no runtime to tell.
func runtimeOfOwner(ctx context.Context, c client.Reader, o tenant.Owner) *memoryv1alpha1.MemoryRuntime {
	if c == nil || o.Namespace == "" || o.Name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var rt memoryv1alpha1.MemoryRuntime
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, &rt); err != nil || string(rt.UID) != o.UID {
		return nil
	}
	return &rt
}
