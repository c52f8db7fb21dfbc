package controller

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioTenantTransactionReaped is the MEDIUM of issue 26's hostile review
// against the running operator: tenant A's login role (the credentials of
// its <name>-db Secret) holds a snapshot open, its timeouts SET away, while
// nothing is provisioned. The transaction reaper, over the operator's own
// connection pools, ends the session once its transaction is older than
// the maximum age (2 s here), records a Warning TransactionEnded on A, and
// counts it, also when another connection Secret names the same database
// with a wrong password. The suite's operator runs no reaper of its own (it would race
// scenarioTenantSnapshot's watcher for the same kind of session): this one is
// built by the constructor Setup uses, with a short interval.
func scenarioTenantTransactionReaped(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "reap")
	a := e.readyRuntime(t, newRuntime(ns, "a", ""))
	uri, role := e.tenantLogin(t, ns, "a")
	snap := testenv.HoldSnapshot(t, uri, "SELECT count(*) FROM memories")
	ended := testutil.ToFloat64(oldTransactions.WithLabelValues("ended"))

	// A connection Secret with a wrong password for the same database, as
	// a tenant may write (TenantBoundary's badpw): its pool sorts first
	// and must not stand in for the operator's working one.
	wrong, err := url.Parse(e.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	wrong.User = url.UserPassword(wrong.User.Username(), "wrong-password")
	if _, err := e.runtimes.pools.get("cluster/0-wrong-password", wrong.String()); err != nil {
		t.Fatal(err)
	}
	e.runtimes.pools.prove("cluster/0-wrong-password") // as if it had answered once

	o := Options{TenantBlockerMaxAge: 2 * time.Second, TenantReaperInterval: 250 * time.Millisecond}.withDefaults()
	reaper := newTransactionReaper(e.mgr.GetClient(), e.runtimes.pools, e.mgr.GetEventRecorder(naming.FieldOwner), o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reaper.Start(ctx) }()
	defer func() { cancel(); <-done }()

	e.waitEvent(t, ns, "a", memoryv1alpha1.ReasonTransactionEnded,
		fmt.Sprintf("session %d of this runtime's login role %s: its transaction had been open", snap.PID, role))
	e.waitEvent(t, ns, "a", memoryv1alpha1.ReasonTransactionEnded, "held back the cleanup (VACUUM) of every tenant's tables")
	for _, ev := range e.events(t, ns, "a") {
		if ev.Reason == memoryv1alpha1.ReasonTransactionEnded && ev.Type != corev1.EventTypeWarning {
			t.Errorf("event %s on A is %s, want Warning", ev.Reason, ev.Type)
		}
	}
	if err := snap.Alive(); err == nil {
		t.Fatal("A's session is still alive")
	}
	if got := testutil.ToFloat64(oldTransactions.WithLabelValues("ended")); got < ended+1 {
		t.Errorf("engram_operator_old_tenant_transactions_total{outcome=\"ended\"} = %v, want at least %v", got, ended+1)
	}

	// A session reported from a database A's own connection does not
	// reach (a server behind a tenant's connection Secret may claim any
	// marker) writes no event on A.
	spy := &countingRecorder{EventRecorder: e.mgr.GetEventRecorder(naming.FieldOwner)}
	elsewhere := newTransactionReaper(e.mgr.GetClient(), e.runtimes.pools, spy, o)
	h := tenant.HeldTransaction{PID: snap.PID, Role: role, Tenant: TenantOwner(a), OpenFor: time.Minute, Ended: true}
	elsewhere.report(testContext(t), node{addr: "203.0.113.1:5432/elsewhere"}, h)
	if n := spy.n.Load(); n != 0 {
		t.Errorf("a session reported from another database wrote %d event(s) on A, want none", n)
	}
	elsewhere.report(testContext(t), node{addr: e.runtimes.pools.address(connectionID(a))}, h)
	if n := spy.n.Load(); n != 1 {
		t.Errorf("a session reported from A's own database wrote %d event(s) on A, want 1", n)
	}
}

// countingRecorder counts the events it passes on.
type countingRecorder struct {
	events.EventRecorder
	n atomic.Int32
}

func (c *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	c.n.Add(1)
	c.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
