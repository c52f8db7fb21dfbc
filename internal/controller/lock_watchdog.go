package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// lockWatchdog ends, on every database the operator has a connection to,
// the sessions of tenants' login roles that hold more than
// --tenant-lock-threshold locks in the server's shared lock table
// (tenant.LockWatchdog), every --tenant-lock-watch-interval. One such
// session fills the table in seconds, and then every session of the
// server fails: the reaper's interval is far too long for it, and the
// reaper's queries fail on a full table.
//
// Each database gets its own connection, opened at the first round and
// kept: a connection opened after the table is full could not log in. It
// runs on the leader only.
type lockWatchdog struct {
	client    client.Reader
	pools     *poolCache
	events    eventer
	interval  time.Duration
	threshold int
	log       logr.Logger

	dogs map[string]*tenant.LockWatchdog // by poolCache.databases key
}

func newLockWatchdog(c client.Reader, pools *poolCache, rec events.EventRecorder, o Options) *lockWatchdog {
	return &lockWatchdog{
		client: c, pools: pools, events: eventer{rec: rec},
		interval: o.TenantLockWatchInterval, threshold: o.TenantLockThreshold,
		log:  ctrl.Log.WithName("lock-watchdog"),
		dogs: map[string]*tenant.LockWatchdog{},
	}
}

// Start implements manager.Runnable: a round every interval until ctx ends.
func (w *lockWatchdog) Start(ctx context.Context) error {
	defer w.closeAll()
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			w.round(ctx)
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (w *lockWatchdog) NeedLeaderElection() bool { return true }

func (w *lockWatchdog) closeAll() {
	for key, d := range w.dogs {
		_ = d.Close(context.Background())
		delete(w.dogs, key)
	}
}

// round looks at each database once, opening the watchdogs of databases
// new since the last round and closing those of databases gone.
func (w *lockWatchdog) round(ctx context.Context) {
	dbs := w.pools.databases()
	for key, d := range w.dogs {
		if _, ok := dbs[key]; !ok {
			_ = d.Close(context.Background())
			delete(w.dogs, key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(dbs)) {
		if ctx.Err() != nil {
			return
		}
		d, err := w.dog(ctx, key, dbs[key])
		if err != nil {
			lockWatchLooks.WithLabelValues("error").Inc()
			w.log.V(1).Info("opening the lock watchdog's connection failed", "database", key, "error", err.Error())
			continue
		}
		hogs, err := d.Look(ctx)
		if err != nil {
			// A broken connection is opened anew next round.
			lockWatchLooks.WithLabelValues("error").Inc()
			w.log.V(1).Info("looking for tenant sessions holding many locks failed", "database", key, "error", err.Error())
			_ = d.Close(context.Background())
			delete(w.dogs, key)
			continue
		}
		lockWatchLooks.WithLabelValues("ok").Inc()
		for _, h := range hogs {
			w.report(ctx, dbs[key].addr, d.Threshold(), h)
		}
	}
}

// dog returns the watchdog of key, opening it with the first pool's
// connection settings that answers.
func (w *lockWatchdog) dog(ctx context.Context, key string, t dbTarget) (*tenant.LockWatchdog, error) {
	if d := w.dogs[key]; d != nil {
		return d, nil
	}
	var err error
	for _, p := range t.pools {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var d *tenant.LockWatchdog
		d, err = tenant.OpenLockWatchdog(octx, p.Config().ConnConfig, w.threshold)
		cancel()
		if err == nil {
			w.dogs[key] = d
			return d, nil
		}
	}
	return nil, err
}

// report records one session found on the database at addr: ended, a
// Warning event LocksExceeded on the runtime that owns the role (only when
// its UID matches and its own connection reaches that database, as for
// the transaction reaper); not ended, an error in the operator's log.
func (w *lockWatchdog) report(ctx context.Context, addr string, threshold int, h tenant.LockHog) {
	log := w.log.WithValues("pid", h.PID, "role", h.Role, "runtime", h.Tenant.Runtime(), "locks", h.Locks)
	if !h.Ended {
		lockHogs.WithLabelValues("failed").Inc()
		log.Error(nil, "a tenant's session holds many locks of the server's shared lock table and was not ended", "problem", h.Problem)
		return
	}
	lockHogs.WithLabelValues("ended").Inc()
	log.Info("ended a tenant's session that held many locks of the server's shared lock table")
	if rt := runtimeOfOwner(ctx, w.client, h.Tenant); rt != nil && w.pools.address(connectionID(rt)) == addr {
		w.events.warning(rt, memoryv1alpha1.ReasonLocksExceeded, "Terminate",
			"the operator ended session %d of this runtime's login role %s: it held %d locks in the server's shared lock table, which every tenant of the server shares; a tenant's session may hold at most %d",
			h.PID, h.Role, h.Locks, threshold)
	}
}
