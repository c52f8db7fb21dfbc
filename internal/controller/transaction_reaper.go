package controller

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// transactionReaper ends, on every database the operator has a connection
// to and on every worker of those that are Citus clusters, the sessions of
// tenants' login roles whose transaction has held back the cleanup for
// longer than --tenant-blocker-max-age (tenant.Reaper), every
// --tenant-reaper-interval. A tenant can otherwise keep a snapshot open for
// as long as it likes, its timeouts SET away, and no VACUUM of any other
// tenant's tables removes a dead row meanwhile; the provisioning watcher
// bounds that only while the operator provisions. A Citus coordinator is
// left out (tenant.ErrReaperOnCitus): its workers are looked at instead.
//
// The nodeRunner runs it on the leader only, each node in a goroutine of
// its own, so a database named by several connections is looked at once
// per interval.
type transactionReaper struct {
	*nodeRunner
	client client.Reader
	events eventer
	maxAge time.Duration
	log    logr.Logger

	// reapers remember, per node, when each transaction was first seen and
	// what was reported.
	reapers perNode[*tenant.Reaper]
	// citus: coordinators, said once in the log.
	citus perNode[bool]
}

func newTransactionReaper(c client.Reader, pools *poolCache, rec events.EventRecorder, o Options) *transactionReaper {
	r := &transactionReaper{
		client: c, events: eventer{rec: rec}, maxAge: o.TenantBlockerMaxAge,
		log: ctrl.Log.WithName("transaction-reaper"),
	}
	r.nodeRunner = newNodeRunner("engram-transaction-reaper", pools, o.TenantReaperInterval, r, reaperLooks, r.log)
	return r
}

// open implements nodeJob: the reaper keeps nothing per connection.
func (r *transactionReaper) open(context.Context, node, *pgx.Conn) error { return nil }

// look implements nodeJob. A look that failed has ended nothing
// (tenant.Reaper.Look fails only before it acts).
func (r *transactionReaper) look(ctx context.Context, n node, conn *pgx.Conn) error {
	rp := r.reapers.get(n.key, func() *tenant.Reaper { return &tenant.Reaper{MaxAge: r.maxAge} })
	held, err := rp.Look(ctx, conn)
	if errors.Is(err, tenant.ErrReaperOnCitus) {
		if said := r.citus.swap(n.key, true); !said {
			r.log.Info("not looking for old tenant transactions on a Citus coordinator: its workers are looked at instead", "database", n.key)
		}
		return nil
	}
	if err != nil {
		return err
	}
	r.reportLook(ctx, n, held)
	return nil
}

// reportLook reports the sessions of one look on node n: the first few of
// each outcome one by one, the rest in one line with their counts.
func (r *transactionReaper) reportLook(ctx context.Context, n node, held []tenant.HeldTransaction) {
	var lines reapLines
	for _, h := range held {
		r.reportLine(ctx, n, h, &lines)
	}
	if lines.endedMore+lines.failedMore > 0 {
		r.log.Error(nil, "more tenants' transactions held back the cleanup of their database than are logged one by one",
			"node", n.key, "endedNotLogged", lines.endedMore, "notEndedNotLogged", lines.failedMore)
	}
}

// maxReapLinesPerLook is how many sessions of each outcome (ended, not
// ended) a look logs one by one; the rest go into one line with their
// counts. A tenant-run server names the sessions, up to 10,000 a look
// with new pids each time: a line each was up to 10,000 lines a look
// (issue 26, eleventh review, L1). Metrics and events still count each.
const maxReapLinesPerLook = 5

// reapLines counts one look's log lines by outcome, and those left out.
type reapLines struct {
	ended, failed         int
	endedMore, failedMore int
}

// forget implements nodeJob.
func (r *transactionReaper) forget(key string) {
	r.reapers.forget(key)
	r.citus.forget(key)
}

// report records one session found on node n: ended, a Warning event TransactionEnded on the runtime
// that owns the role (eventRuntime: a server reached through a tenant's own
// connection Secret cannot make the operator write events on other
// tenants' runtimes); not ended, an error in the operator's log (the
// tenant cannot fix the admin's privileges).
func (r *transactionReaper) report(ctx context.Context, n node, h tenant.HeldTransaction) {
	r.reportLine(ctx, n, h, &reapLines{})
}

// reportLine is report within a look: past maxReapLinesPerLook of an
// outcome, the session is counted in lines instead of logged.
func (r *transactionReaper) reportLine(ctx context.Context, n node, h tenant.HeldTransaction, lines *reapLines) {
	open := h.OpenFor.Round(100 * time.Millisecond)
	log := r.log.WithValues("node", n.key, "pid", h.PID, "role", h.Role, "runtime", h.Tenant.Runtime(), "openFor", open.String())
	if !h.Ended {
		oldTransactions.WithLabelValues("failed").Inc()
		if lines.failed++; lines.failed > maxReapLinesPerLook {
			lines.failedMore++
			return
		}
		log.Error(nil, "a tenant's transaction holds back the cleanup of its database and was not ended", "problem", h.Problem)
		return
	}
	oldTransactions.WithLabelValues("ended").Inc()
	if lines.ended++; lines.ended > maxReapLinesPerLook {
		lines.endedMore++
	} else {
		log.Info("ended a tenant's session whose transaction held back the cleanup of its database")
	}
	if rt := eventRuntime(ctx, r.client, r.pools, h.Tenant, n.addr); rt != nil {
		r.events.warning(rt, memoryv1alpha1.ReasonTransactionEnded, "Terminate",
			"the operator ended session %d of this runtime's login role %s: its transaction had been open %s and held back the cleanup (VACUUM) of every tenant's tables in the database; a tenant's transaction may do so for at most %s",
			h.PID, h.Role, open, r.maxAge)
	}
}
