package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioDatabaseServerDown: two real PostgreSQL servers, one stopped. The
// stopped one's MemoryDatabase reports it (Reachable False, a Warning
// event); the runtime living there reports it too (DatabaseReady and Ready
// False with reason DatabaseUnreachable, Reconciling: kstatus InProgress,
// one Warning event), while the runtime on the other server stays Ready
// and is not even written to; a new runtime with a selector that matches
// both goes to the one that is up, although the stopped one has more room.
// When the server is back, its tenant is Ready again with nothing edited.
// What this scenario leaves on the suite's database (a MemoryDatabase and
// two Ready runtimes) stays for the idle check.
func scenarioDatabaseServerDown(e *operatorEnv, t *testing.T) {
	in := testenv.NewInstance(t, "dbdown")
	serverURL := in.Start(t)
	downURL := in.NewDatabase(t)
	sfx := randomSuffix()
	tier := "down-" + sfx
	mustCreate(t, e.c, uriSecret(e.opNS, "pg-up-"+sfx, e.adminURL))
	downSecret := uriSecret(e.opNS, "pg-down-"+sfx, downURL)
	mustCreate(t, e.c, downSecret)
	up := memoryDatabase("up-"+sfx, "pg-up-"+sfx, map[string]string{"tier": tier}, 10)
	down := memoryDatabase("down-"+sfx, "pg-down-"+sfx, map[string]string{"tier": tier}, 0) // no bound: the most room
	mustCreate(t, e.c, up)
	mustCreate(t, e.c, down)
	e.waitReachable(t, up.Name, true, "")
	e.waitReachable(t, down.Name, true, "")

	ns := e.newNamespace(t, "dbdown")
	onUp := e.readyRuntime(t, databaseRuntime(ns, "on-up", up.Name, ""))
	onDown := e.readyRuntime(t, databaseRuntime(ns, "on-down", down.Name, ""))
	if onUp.PlacedDatabase() != up.Name || onDown.PlacedDatabase() != down.Name {
		t.Fatalf("placed on %q and %q", onUp.PlacedDatabase(), onDown.PlacedDatabase())
	}
	if !schemaIn(t, downURL, onDown.Status.Schema) {
		t.Fatalf("schema %s is not on the second server", onDown.Status.Schema)
	}

	stopped := time.Now()
	in.Stop(t)
	got := e.waitReachable(t, down.Name, false, memoryv1alpha1.ReasonDatabaseUnreachable)
	noticed := time.Since(stopped)
	e.waitKStatusDatabase(t, down.Name, status.InProgressStatus)
	rt := e.waitCondition(t, ns, "on-down", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonDatabaseUnreachable)
	reported := time.Since(stopped)
	if c := rt.GetCondition(memoryv1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != memoryv1alpha1.ReasonDatabaseUnreachable {
		t.Errorf("Ready = %+v", c)
	}
	if err := containsAll(rt.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, down.Name, "unreachable"); err != nil {
		t.Error(err)
	}
	e.waitKStatus(t, rt, status.InProgressStatus, memoryv1alpha1.ReasonDatabaseUnreachable)
	e.waitEventSince(t, ns, "on-down", memoryv1alpha1.ReasonDatabaseUnreachable, down.Name, stopped)
	e.waitEventSince(t, metav1.NamespaceDefault, down.Name, memoryv1alpha1.ReasonDatabaseUnreachable, "", stopped)
	t.Logf("server stopped: its MemoryDatabase said so after %s, its runtime after %s (check interval 1 s); database message: %s",
		noticed.Round(time.Millisecond), reported.Round(time.Millisecond), got.GetCondition(memoryv1alpha1.ConditionReachable).Message)

	// A new tenant goes to the server that is up.
	fresh := e.readyRuntime(t, databaseRuntime(ns, "new", "", tier))
	if fresh.PlacedDatabase() != up.Name {
		t.Errorf("the new runtime was placed on %q, want %s", fresh.PlacedDatabase(), up.Name)
	}

	// While the server stays down: one Warning per runtime, not one per
	// check; the runtime on the other server is not written at all.
	var beforeUp memoryv1alpha1.MemoryRuntime
	if err := e.get(t, ns, "on-up", &beforeUp); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	warnings := 0
	for _, ev := range e.events(t, ns, "on-down") {
		if ev.Reason == memoryv1alpha1.ReasonDatabaseUnreachable && !ev.EventTime.Time.Before(stopped.Truncate(time.Microsecond)) {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d DatabaseUnreachable events about on-down since the server stopped, want 1", warnings)
	}
	var afterUp memoryv1alpha1.MemoryRuntime
	if err := e.get(t, ns, "on-up", &afterUp); err != nil {
		t.Fatal(err)
	}
	if afterUp.ResourceVersion != beforeUp.ResourceVersion {
		t.Errorf("the runtime on the server that is up was written while the other was down")
	}
	e.waitCondition(t, ns, "on-up", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// The server comes back: nothing to edit (unless it came back on
	// another port, which the script may have to pick).
	if again := in.Start(t); again != serverURL {
		t.Logf("the second server came back on another address; updating its Secret")
		downURL = strings.Replace(downURL, mustParseURL(t, serverURL).Host, mustParseURL(t, again).Host, 1)
		update(t, e, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.opNS, Name: downSecret.Name}}, func(s *corev1.Secret) {
			s.Data = map[string][]byte{"uri": []byte(downURL)}
		})
	}
	back := time.Now()
	e.waitReachable(t, down.Name, true, memoryv1alpha1.ReasonConnected)
	e.waitCondition(t, ns, "on-down", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	e.waitKStatus(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-down"}}, status.CurrentStatus, "")
	t.Logf("server back: its tenant Ready again after %s", time.Since(back).Round(time.Millisecond))

	// A restarted operator (no reservation, nothing remembered) finds the
	// placed tenant where its status says and writes nothing.
	mark := e.writes.count()
	restarted := e.runtimes.restarted()
	for range 2 {
		if _, err := restarted.Reconcile(testContext(t), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "on-up"}}); err != nil {
			t.Fatalf("reconcile of a restarted operator: %v", err)
		}
	}
	for _, w := range e.writes.since(mark) {
		if strings.Contains(w, "/namespaces/"+ns+"/") {
			t.Errorf("a restarted operator wrote to a placed Ready runtime's namespace: %s", w)
		}
	}

	// The tenant on the second server goes with its database; the others
	// stay for the idle check.
	e.deleteAndWait(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-down"}})
	if schemaIn(t, downURL, onDown.Status.Schema) {
		t.Errorf("schema %s left on the second server", onDown.Status.Schema)
	}
	e.deleteAndWait(t, down)
}

// waitKStatusDatabase waits until kstatus reports want for a MemoryDatabase.
func (e *operatorEnv) waitKStatusDatabase(t *testing.T, name string, want status.Status) {
	t.Helper()
	e.waitKStatus(t, &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: name}}, want, "")
}
