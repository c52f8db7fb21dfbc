package controller

import (
	"context"
	"fmt"

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
	client    client.Reader
	events    eventer
	threshold int
	log       logr.Logger

	dogs map[string]*tenant.LockWatchdog // by node key, on the node's connection
}

func newLockWatchdog(c client.Reader, pools *poolCache, rec events.EventRecorder, o Options) *lockWatchdog {
	w := &lockWatchdog{
		client: c, events: eventer{rec: rec}, threshold: o.TenantLockThreshold,
		log:  ctrl.Log.WithName("lock-watchdog"),
		dogs: map[string]*tenant.LockWatchdog{},
	}
	w.nodeRunner = newNodeRunner("engram-lock-watchdog", pools, o.TenantLockWatchInterval, w, lockWatchLooks, w.log)
	return w
}

// open implements nodeJob: the watchdog learns the roles and prepares its
// statements on the new connection, before any trouble.
func (w *lockWatchdog) open(ctx context.Context, n node, conn *pgx.Conn) error {
	d, err := tenant.NewLockWatchdog(ctx, conn, w.threshold)
	if err != nil {
		return err
	}
	w.dogs[n.key] = d
	return nil
}

// look implements nodeJob.
func (w *lockWatchdog) look(ctx context.Context, n node, _ *pgx.Conn) error {
	d := w.dogs[n.key]
	if d == nil {
		return fmt.Errorf("no lock watchdog opened on %s", n.key)
	}
	hogs, err := d.Look(ctx)
	if err != nil {
		return err
	}
	for _, h := range hogs {
		w.report(ctx, n, d.Threshold(), h)
	}
	return nil
}

// forget implements nodeJob (the runner closes the connection).
func (w *lockWatchdog) forget(key string) { delete(w.dogs, key) }

// report records one session found on node n: ended, a Warning event
// LocksExceeded on the runtime that owns the role (eventRuntime, as for
// the transaction reaper); not ended, an error in the operator's log.
func (w *lockWatchdog) report(ctx context.Context, n node, threshold int, h tenant.LockHog) {
	log := w.log.WithValues("node", n.key, "pid", h.PID, "role", h.Role, "runtime", h.Tenant.Runtime(), "locks", h.Locks)
	if !h.Ended {
		lockHogs.WithLabelValues("failed").Inc()
		log.Error(nil, "a tenant's session holds many locks of the server's shared lock table and was not ended", "problem", h.Problem)
		return
	}
	lockHogs.WithLabelValues("ended").Inc()
	log.Info("ended a tenant's session that held many locks of the server's shared lock table")
	if rt := eventRuntime(ctx, w.client, w.pools, h.Tenant, n.addr); rt != nil {
		w.events.warning(rt, memoryv1alpha1.ReasonLocksExceeded, "Terminate",
			"the operator ended session %d of this runtime's login role %s: it held %d locks in the server's shared lock table, which every tenant of the server shares; a tenant's session may hold at most %d",
			h.PID, h.Role, h.Locks, threshold)
	}
}
