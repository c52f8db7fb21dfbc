package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// testTenantTransactionReaped is the MEDIUM of issue 26's hostile review
// against the running operator: tenant A's login role (the credentials of
// its <name>-db Secret) holds a snapshot open, its timeouts SET away, while
// nothing is provisioned. The transaction reaper, over the operator's own
// connection pools, ends the session once its transaction is older than
// the maximum age (2 s here), records a Warning TransactionEnded on A, and
// counts it. The suite's operator runs no reaper of its own (it would race
// testTenantSnapshot's watcher for the same kind of session): this one is
// built by the constructor Setup uses, with a short interval.
func (e *operatorEnv) testTenantTransactionReaped(t *testing.T) {
	ns := e.newNamespace(t, "reap")
	e.readyRuntime(t, newRuntime(ns, "a", ""))
	var creds corev1.Secret
	if err := e.get(t, ns, "a-db", &creds); err != nil {
		t.Fatal(err)
	}
	uri, role := string(creds.Data["uri"]), string(creds.Data["user"])
	snap := testenv.HoldSnapshot(t, uri, "SELECT count(*) FROM memories")
	ended := testutil.ToFloat64(oldTransactions.WithLabelValues("ended"))

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
}
