package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// transactionReaper ends, on every database the operator has a connection
// to, the sessions of tenants' login roles whose transaction has held back
// the database's cleanup for longer than --tenant-blocker-max-age
// (tenant.Reaper), every --tenant-reaper-interval. A tenant can otherwise
// keep a snapshot open for as long as it likes, its timeouts SET away, and
// no VACUUM of any other tenant's tables removes a dead row meanwhile; the
// provisioning watcher bounds that only while the operator provisions.
//
// It runs on the leader only, one database after the other, so a database
// named by several connections is looked at once per round.
type transactionReaper struct {
	client   client.Reader
	pools    *poolCache
	events   eventer
	maxAge   time.Duration
	interval time.Duration
	log      logr.Logger

	// reapers remember, per database (poolCache.databases), when each
	// transaction was first seen and what was reported.
	reapers map[string]*tenant.Reaper
	// citus: databases found to be Citus clusters, said once in the log.
	citus map[string]bool
}

func newTransactionReaper(c client.Reader, pools *poolCache, rec events.EventRecorder, o Options) *transactionReaper {
	return &transactionReaper{
		client: c, pools: pools, events: eventer{rec: rec},
		maxAge: o.TenantBlockerMaxAge, interval: o.TenantReaperInterval,
		log:     ctrl.Log.WithName("transaction-reaper"),
		reapers: map[string]*tenant.Reaper{},
		citus:   map[string]bool{},
	}
}

// Start implements manager.Runnable: a round every interval until ctx ends.
func (r *transactionReaper) Start(ctx context.Context) error {
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.round(ctx)
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica ends sessions and records events.
func (r *transactionReaper) NeedLeaderElection() bool { return true }

// round looks at each database once. The pools are those the reconcilers
// opened: every connection a runtime or a MemoryDatabase uses.
func (r *transactionReaper) round(ctx context.Context) {
	dbs := r.pools.databases()
	for key := range r.reapers {
		if _, ok := dbs[key]; !ok {
			delete(r.reapers, key)
			delete(r.citus, key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(dbs)) {
		if ctx.Err() != nil {
			return
		}
		rp := r.reapers[key]
		if rp == nil {
			rp = &tenant.Reaper{MaxAge: r.maxAge}
			r.reapers[key] = rp
		}
		held, err := look(ctx, rp, dbs[key].pools)
		if errors.Is(err, tenant.ErrReaperOnCitus) {
			if !r.citus[key] {
				r.citus[key] = true
				r.log.Info("not looking for old tenant transactions on a Citus cluster", "database", key)
			}
			continue
		}
		if err != nil {
			// An unreachable database is reported by the reconcilers
			// that use it; here it only waits for the next round.
			reaperLooks.WithLabelValues("error").Inc()
			r.log.V(1).Info("looking for old tenant transactions failed", "error", err.Error())
			continue
		}
		reaperLooks.WithLabelValues("ok").Inc()
		for _, h := range held {
			r.report(ctx, dbs[key].addr, h)
		}
	}
}

// look asks rp to look through the first of pools that answers. A look
// that failed has ended nothing (tenant.Reaper.Look fails only before it
// acts), so trying the next pool is safe.
func look(ctx context.Context, rp *tenant.Reaper, pools []*pgxpool.Pool) ([]tenant.HeldTransaction, error) {
	var errs []error
	for _, p := range pools {
		held, err := rp.Look(ctx, p)
		if err == nil || errors.Is(err, tenant.ErrReaperOnCitus) || ctx.Err() != nil {
			return held, err
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// report records one session found on the database at addr: ended, a
// Warning event TransactionEnded on the runtime that owns the role (found
// by the marker's namespace/name, only when its UID matches and its own
// connection reaches that database: a server reached through a tenant's
// own connection Secret cannot make the operator write events on other
// tenants' runtimes); not ended, an error in the operator's log (the
// tenant cannot fix the admin's privileges).
func (r *transactionReaper) report(ctx context.Context, addr string, h tenant.HeldTransaction) {
	open := h.OpenFor.Round(100 * time.Millisecond)
	log := r.log.WithValues("pid", h.PID, "role", h.Role, "runtime", h.Tenant.Runtime(), "openFor", open.String())
	if !h.Ended {
		oldTransactions.WithLabelValues("failed").Inc()
		log.Error(nil, "a tenant's transaction holds back the cleanup of its database and was not ended", "problem", h.Problem)
		return
	}
	oldTransactions.WithLabelValues("ended").Inc()
	log.Info("ended a tenant's session whose transaction held back the cleanup of its database")
	if rt := runtimeOfOwner(ctx, r.client, h.Tenant); rt != nil && r.pools.address(connectionID(rt)) == addr {
		r.events.warning(rt, memoryv1alpha1.ReasonTransactionEnded, "Terminate",
			"the operator ended session %d of this runtime's login role %s: its transaction had been open %s and held back the cleanup (VACUUM) of every tenant's tables in the database; a tenant's transaction may do so for at most %s",
			h.PID, h.Role, open, r.maxAge)
	}
}
