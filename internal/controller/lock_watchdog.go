package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// lockWatchdog ends, on every database the operator has a connection to
// and on every worker of those that are Citus clusters (each server has a
// lock table of its own), the sessions of tenants' login roles that hold
// more than --tenant-lock-threshold locks in the server's shared lock
// table (tenant.LockWatchdog), every --tenant-lock-watch-interval. One
// such session fills the table in seconds, and then every session of the
// server fails: the reaper's interval is far too long for it, and the
// reaper's queries fail on a full table.
//
// The nodeRunner keeps each node's connection from its first round: a
// connection opened after the table is full could not log in. It runs on
// the leader only.
type lockWatchdog struct {
	*nodeRunner
	client client.Reader
	events eventer
	policy tenant.LockPolicy
	log    logr.Logger

	dogs perNode[*tenant.LockWatchdog] // on the node's connection

	// failures: which sessions that could not be ended were logged lately
	// (bounded per node, fixed-size keys).
	failures *failureLog
}

func newLockWatchdog(c client.Reader, pools *poolCache, rec events.EventRecorder, o Options) *lockWatchdog {
	w := &lockWatchdog{
		client: c, events: eventer{rec: rec},
		policy: tenant.LockPolicy{
			Threshold: o.TenantLockThreshold, TableShare: o.TenantLockTableShare, Quarantine: o.TenantLockQuarantine,
			Connections: tenant.ConnectionPolicy{Share: o.TenantConnectionShare},
		},
		log:      ctrl.Log.WithName("lock-watchdog"),
		failures: newFailureLog(),
	}
	w.nodeRunner = newNodeRunner("engram-lock-watchdog", pools, o.TenantLockWatchInterval, w, lockWatchLooks, w.log)
	return w
}

// open implements nodeJob: the watchdog learns the roles and prepares its
// statements on the new connection, before any trouble.
func (w *lockWatchdog) open(ctx context.Context, n node, conn *pgx.Conn) error {
	d, err := tenant.NewLockWatchdog(ctx, conn, w.policyFor(n))
	if err != nil {
		return err
	}
	w.dogs.set(n.key, d)
	return nil
}

// policyFor is the watchdog's policy on node n: on a server a tenant runs
// it keeps at most tenant.MaxTenantWatchedRoles roles, the most one
// namespace has.
func (w *lockWatchdog) policyFor(n node) tenant.LockPolicy {
	p := w.policy
	if n.tenantRun() {
		p.MaxRoles = tenant.MaxTenantWatchedRoles
	}
	return p
}

// look implements nodeJob.
func (w *lockWatchdog) look(ctx context.Context, n node, _ *pgx.Conn) error {
	d := w.dogs.get(n.key, nil)
	if d == nil {
		return fmt.Errorf("no lock watchdog opened on %s", n.key)
	}
	hogs, err := d.Look(ctx)
	if err != nil {
		return err
	}
	w.reportHogs(ctx, n, hogs)
	return nil
}

// reportHogs reports the roles of one look on node n: the ended ones
// logged one by one up to maxReapLinesPerLook, the rest in one line with
// their count (a tenant-run server may name 1,000 roles a look, with new
// pids each time; issue 26, thirteenth review, L3), the failed ones once
// a minute each (failureLog). Metrics and events still count each.
func (w *lockWatchdog) reportHogs(ctx context.Context, n node, hogs []tenant.LockHog) {
	w.failures.startLook(n.key, time.Now())
	logged, endedMore := 0, 0
	for _, h := range hogs {
		logEnded := h.Ended && logged < maxReapLinesPerLook
		switch {
		case logEnded:
			logged++
		case h.Ended:
			endedMore++
		}
		w.reportLine(ctx, n, h, logEnded)
	}
	if endedMore > 0 {
		w.log.Info("more of a tenant's login roles were ended for holding many locks of the server's shared lock table than are logged one by one",
			"node", n.key, "endedNotLogged", endedMore)
	}
	if more := w.failures.endLook(n.key); more > 0 {
		w.log.Error(nil, "more of a tenant's login roles hold many locks of the server's shared lock table and were not ended (not logged one by one)",
			"node", n.key, "more", more)
	}
}

// forget implements nodeJob (the runner closes the connection).
func (w *lockWatchdog) forget(key string) {
	w.dogs.forget(key)
	w.failures.forget(key)
}

// report records one role ended on node n: ended, a Warning event
// LocksExceeded on the runtime that owns the role (eventRuntime, as for
// the transaction reaper); not ended, an error in the operator's log.
func (w *lockWatchdog) report(ctx context.Context, n node, h tenant.LockHog) {
	w.reportLine(ctx, n, h, true)
}

// reportLine is report, the ended role logged only when logEnded.
func (w *lockWatchdog) reportLine(ctx context.Context, n node, h tenant.LockHog, logEnded bool) {
	log := w.log.WithValues("node", n.key, "pid", h.PID, "role", h.Role, "runtime", h.Tenant.Runtime(), "locks", h.Locks)
	if !h.Ended {
		lockHogs.WithLabelValues("failed").Inc()
		if w.failures.first(n.key, h.PID, time.Now()) {
			log.Error(nil, "a tenant's login role holds many locks of the server's shared lock table and was not ended (said once a minute per session)", "problem", h.Problem)
		}
		return
	}
	lockHogs.WithLabelValues("ended").Inc()
	if logEnded {
		log.Info("ended the sessions of a tenant's login role that held many locks of the server's shared lock table",
			"sessions", h.Sessions, "quarantine", h.Quarantine.String(), "why", h.Why)
	}
	if rt := eventRuntimeOnServer(ctx, w.client, w.pools, h.Tenant, n.addr); rt != nil {
		w.events.warning(rt, memoryv1alpha1.ReasonLocksExceeded, "Terminate", "%s", lockHogNote(h))
	}
}

// lockHogNote is the event's message: what was over which bound, what
// was ended, and for how long the role's logins are refused.
func lockHogNote(h tenant.LockHog) string {
	quarantine := fmt.Sprintf("its logins are refused for %s (CONNECTION LIMIT 0: \"too many connections for role\"), then the limit is restored; each repeat doubles that, up to %s",
		h.Quarantine, tenant.DefaultMaxQuarantine)
	if h.Quarantine == 0 {
		quarantine = "refusing its logins failed for now (" + h.QuarantineProblem + "); the operator tries again at its next look"
	}
	return fmt.Sprintf("the operator ended %d session(s) of this runtime's login role %s: %s; %s", h.Sessions, h.Role, h.Why, quarantine)
}
