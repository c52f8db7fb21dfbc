package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// testLocksExceeded: tenant A's login role (the credentials of its <name>-db
// Secret) opens savepoints that each write a row, one transaction, more
// locks than the threshold (20 here: a handful, nothing near the shared
// server's lock table, which the other tests use; the exhaustion itself is
// TestLockWatchdogEndsASavepointFlood's, on a throw-away instance). The
// lock watchdog, over the operator's own connection pools, ends the session
// and records a Warning LocksExceeded on A, and counts it. The suite's
// operator runs its own watchdog with the default threshold; this one is
// built by the constructor Setup uses, with a low threshold.
func scenarioLocksExceeded(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "locks")
	e.readyRuntime(t, newRuntime(ns, "a", ""))
	uri, role := e.tenantLogin(t, ns, "a")
	ended := testutil.ToFloat64(lockHogs.WithLabelValues("ended"))

	o := Options{TenantLockThreshold: 20, TenantLockWatchInterval: 250 * time.Millisecond}.withDefaults()
	dog := newLockWatchdog(e.mgr.GetClient(), e.runtimes.pools, e.mgr.GetEventRecorder(naming.FieldOwner), o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dog.Start(ctx) }()
	defer func() { cancel(); <-done }()

	conn, err := pgx.Connect(testContext(t), uri)
	if err != nil {
		t.Fatalf("logging in as A: %v", err)
	}
	defer conn.Close(context.Background())
	var held strings.Builder
	held.WriteString("BEGIN;")
	for i := range 30 {
		fmt.Fprintf(&held, " SAVEPOINT s%d; INSERT INTO owner_locks VALUES ('locks-%d');", i, i)
	}
	if _, err := conn.Exec(testContext(t), held.String()); err != nil {
		t.Fatalf("A's savepoints: %v", err)
	}
	pid := conn.PgConn().PID()

	e.waitEvent(t, ns, "a", memoryv1alpha1.ReasonLocksExceeded,
		fmt.Sprintf("the operator ended 1 session(s) of this runtime's login role %s: its session %d held", role, pid))
	e.waitEvent(t, ns, "a", memoryv1alpha1.ReasonLocksExceeded, "a tenant's session may hold at most 20")
	e.waitEvent(t, ns, "a", memoryv1alpha1.ReasonLocksExceeded, "its logins are refused for 30s (CONNECTION LIMIT 0")
	for _, ev := range e.events(t, ns, "a") {
		if ev.Reason == memoryv1alpha1.ReasonLocksExceeded && ev.Type != corev1.EventTypeWarning {
			t.Errorf("event %s on A is %s, want Warning", ev.Reason, ev.Type)
		}
	}
	if _, err := conn.Exec(testContext(t), "SELECT 1"); err == nil {
		t.Fatal("A's session is still alive")
	}
	if got := testutil.ToFloat64(lockHogs.WithLabelValues("ended")); got < ended+1 {
		t.Errorf("engram_operator_tenant_lock_hogs_total{outcome=\"ended\"} = %v, want at least %v", got, ended+1)
	}
}

// testBlockerEventOwnDatabase: the provisioning watcher of runtime B, whose
// connection Secret is B's own (a server B's team controls, which may show
// a session carrying any marker, A's included), reports "ended a session
// of runtime A": no event is written on A, whose own connection does not
// reach that server. The same report from a runtime on A's database writes
// one (eventRuntime, the check the reaper and the watchdog make too).
func scenarioBlockerEventOwnDatabase(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "blkev")
	a := e.readyRuntime(t, newRuntime(ns, "a", ""))
	b := newRuntime(ns, "b", "")
	b.Spec.Database = memoryv1alpha1.DatabaseSpec{ConnectionSecretRef: &memoryv1alpha1.SecretKeySelector{Name: "own"}}
	if _, err := e.runtimes.pools.get(connectionID(b), "postgres://owner:pw@203.0.113.1:5432/theirs"); err != nil {
		t.Fatal(err)
	}
	spy := &regardingRecorder{EventRecorder: e.mgr.GetEventRecorder(naming.FieldOwner)}
	r := &MemoryRuntimeReconciler{client: e.runtimes.client, pools: e.runtimes.pools, events: spy, opts: e.runtimes.opts}
	blocker := tenant.Blocker{PID: 4242, Role: "engram_x_login", Kind: tenant.BlockerOtherTenant, Tenant: TenantOwner(a),
		OpenFor: time.Minute, Ended: true}

	r.reportBlocker(testContext(t), b, "engram_b", "admin", blocker)
	if n := spy.about("a"); n != 0 {
		t.Errorf("a blocker reported from B's own server wrote %d event(s) on A, want none", n)
	}
	if n := spy.about("b"); n != 1 {
		t.Errorf("the blocker wrote %d event(s) on B, want 1 (TenantBlockerEnded)", n)
	}
	onA := newRuntime(ns, "c", "") // the same connection as A's
	r.reportBlocker(testContext(t), onA, "engram_c", "admin", blocker)
	if n := spy.about("a"); n != 1 {
		t.Errorf("a blocker reported from A's own database wrote %d event(s) on A, want 1", n)
	}
}

// testLocksExceededOtherDatabase (issue 26's fourth review, LOW): the lock
// table and the sessions are the server's, so when the operator manages
// two databases of one server, the watchdog of the other database may end
// A's role first. A hears of it all the same: the event goes to a runtime
// whose connection reaches the same host:port, any database; never to one
// on another server.
func scenarioLocksExceededOtherDatabase(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "locksrv")
	a := e.readyRuntime(t, newRuntime(ns, "a", ""))
	addr := e.runtimes.pools.address(connectionID(a))
	spy := &regardingRecorder{EventRecorder: e.mgr.GetEventRecorder(naming.FieldOwner)}
	w := newLockWatchdog(e.mgr.GetClient(), e.runtimes.pools, spy, Options{}.withDefaults())
	hog := tenant.LockHog{PID: 4242, Role: "engram_x_login", Tenant: TenantOwner(a), Locks: 500, Sessions: 1,
		Why: "its session 4242 held 500 locks", Quarantine: 30 * time.Second, Ended: true}
	w.report(testContext(t), node{key: "admin@" + serverOf(addr) + "/other_db", addr: serverOf(addr) + "/other_db"}, hog)
	if n := spy.about("a"); n != 1 {
		t.Fatalf("the watchdog of another database of A's server wrote %d event(s) on A, want 1", n)
	}
	w.report(testContext(t), node{key: "admin@203.0.113.1:5432/theirs", addr: "203.0.113.1:5432/theirs"}, hog)
	if n := spy.about("a"); n != 1 {
		t.Fatalf("a watchdog of another server wrote an event on A (%d in all), want none", n)
	}
}

// regardingRecorder counts the events it passes on by the name of the
// object they are about.
type regardingRecorder struct {
	events.EventRecorder
	mu sync.Mutex
	n  map[string]int
}

func (r *regardingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if m, err := meta.Accessor(regarding); err == nil {
		r.mu.Lock()
		if r.n == nil {
			r.n = map[string]int{}
		}
		r.n[m.GetName()]++
		r.mu.Unlock()
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (r *regardingRecorder) about(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name]
}
