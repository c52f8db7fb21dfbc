package controller

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// moveRows is how many memories the move scenarios seed.
const moveRows = 300

// scenarioServerMove (issue 29): a runtime on the shared server with
// onChange: Move whose clusterConnection is changed to another server is
// moved there: Moving, then Switched; the operator dies once right after
// freezing the source's writes and the next run completes the move;
// while frozen the login role cannot write on the source. After the
// switch status.connection is the target, the target holds every row
// (count and checksum), the source schema is marked moved, <rt>-db names
// the target with a password that writes there, and the Deployment's pod
// template changed exactly once. Confirming the run with reclaimPolicy
// Delete drops the source's copy.
func scenarioServerMove(e *operatorEnv, t *testing.T) {
	m := e.startMove(t, moveSetup{instance: "srvmove", ns: "srvmove", connPrefix: "moveto-", rows: moveRows})
	ns, schema, from, targetURL, targetConn, login0, key := m.ns, m.schema, m.from, m.targetURL, m.targetConn, m.login0, m.key
	if from.Via != "cluster/main" {
		t.Fatalf("status.connection.via = %q, want cluster/main", from.Via)
	}
	rows, _ := moveChecksum(t, e.adminURL, schema)
	gen0, hash0 := e.deploymentGeneration(t, ns, "bot"), e.templateHash(t, ns, "bot")

	// The operator dies once right after the freeze; first, a write of the
	// service's login on the source must fail.
	var mu sync.Mutex
	var frozenWrite error
	e.faults.arm(key, "move source frozen", func() {
		err := moveInsert(login0, schema, "written while frozen")
		mu.Lock()
		frozenWrite = err
		mu.Unlock()
	})
	hashes := e.watchTemplateHashes(t, ns, "bot")
	// A client of the service writes all along, through the service's login.
	writer := startMoveWriter(login0, schema)
	e.moveTo(t, ns, targetConn)
	got := e.waitServerMove(t, ns, "bot", memoryv1alpha1.ServerMoveSwitched)
	acked, refused := writer.stop()
	mv := got.Status.ServerMove
	t.Logf("switched: %+v; %d writes acknowledged during the move, %d refused", *mv, len(acked), refused)
	// Right after the switch the frozen source and the target hold the
	// same rows, and every acknowledged write is among them.
	srcRows, srcSum := moveChecksum(t, e.adminURL, schema)
	if n, s := moveChecksum(t, targetURL, schema); n != srcRows || s != srcSum || n < rows+int64(len(acked)) {
		t.Errorf("the target holds %d rows (checksum %s), the frozen source %d (%s); %d seeded + %d acknowledged", n, s, srcRows, srcSum, rows, len(acked))
	}
	if missing := moveMissing(t, targetURL, schema, acked); len(missing) > 0 {
		t.Errorf("%d acknowledged writes are not on the target: %v", len(missing), missing)
	}
	if !e.faults.fired(key) {
		t.Error("the operator was not stopped after the freeze")
	}
	mu.Lock()
	if frozenWrite == nil {
		t.Error("the login role wrote on the frozen source")
	} else {
		t.Logf("a write on the frozen source: %v", frozenWrite)
	}
	mu.Unlock()
	if c := got.Status.Connection; c == nil || c.Via != "cluster/"+targetConn || c.SystemIdentifier == from.SystemIdentifier || c.SystemIdentifier == "" {
		t.Errorf("status.connection = %+v after the switch, want the target's identity via cluster/%s", c, targetConn)
	}
	if mv.Run != 1 || mv.From.Via != "cluster/main" || mv.VerifiedRows < rows || mv.Checksum == "" {
		t.Errorf("status.serverMove = %+v, want run 1 from cluster/main with at least %d rows verified", *mv, rows)
	}
	eventually(t, "the source schema is marked moved", 30*time.Second, func() error {
		if _, comment := schemaAndComment(t, e.adminURL, schema); !strings.Contains(comment, "+moved") {
			return fmt.Errorf("source schema comment %q", comment)
		}
		return nil
	})
	targetHost := mustParseURL(t, targetURL).Host
	var login1 string
	eventually(t, "<rt>-db names the target", 30*time.Second, func() error {
		login1, _ = e.tenantLogin(t, ns, "bot")
		if h := mustParseURL(t, login1).Host; h != targetHost {
			return fmt.Errorf("<rt>-db names %s, want %s", h, targetHost)
		}
		return nil
	})
	if err := moveInsert(login1, schema, "written after the move"); err != nil {
		t.Errorf("the service's new login cannot write on the target: %v", err)
	}
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionMoving, false, memoryv1alpha1.ReasonMoved)
	if gen := e.deploymentGeneration(t, ns, "bot"); gen != gen0+1 {
		t.Errorf("Deployment generation %d → %d across the move, want exactly one change", gen0, gen)
	}
	if seen := hashes(); len(seen) != 2 || seen[0] != hash0 {
		t.Errorf("pod template hashes seen across the move: %v (before: %s), want exactly one change", seen, hash0)
	}

	// Confirm: reclaimPolicy Delete drops the old copy.
	update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations[naming.AnnotationMoveConfirmed] = "1"
	})
	e.waitServerMove(t, ns, "bot", memoryv1alpha1.ServerMoveConfirmed)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionMoving, false, memoryv1alpha1.ReasonMoveConfirmed)
	if schemaIn(t, e.adminURL, schema) {
		t.Errorf("schema %s is still on the old server after the confirmation (reclaimPolicy Delete)", schema)
	}
	e.deleteAndWait(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}})
	if schemaIn(t, targetURL, schema) {
		t.Errorf("schema %s was not reclaimed on its new server", schema)
	}
}

// scenarioServerMoveAbort: spec.database set back while the move catches
// up aborts it: Aborted, the incoming copy is dropped from the target, the
// source takes writes, and the service's Secret and pod template never
// changed. The target is a connectionSecretRef of the runtime's namespace.
func scenarioServerMoveAbort(e *operatorEnv, t *testing.T) {
	m := e.startMove(t, moveSetup{instance: "srvmoveabort", ns: "srvabort", rows: moveRows})
	ns, schema, from, targetURL, login0 := m.ns, m.schema, m.from, m.targetURL, m.login0
	hash0 := e.templateHash(t, ns, "bot")

	held := e.faults.holds.add(m.key, "move "+memoryv1alpha1.ServerMoveCatchingUp)
	e.setDatabase(t, ns, func(d *memoryv1alpha1.DatabaseSpec) {
		d.ClusterConnection = ""
		d.ConnectionSecretRef = &memoryv1alpha1.SecretKeySelector{Name: "own-pg"}
	})
	reachHold(t, held, "reached CatchingUp")
	if !schemaIn(t, targetURL, schema) {
		t.Error("no incoming copy on the target once the bulk copy is done")
	}
	var moving memoryv1alpha1.MemoryRuntime
	if err := e.get(t, ns, "bot", &moving); err != nil {
		t.Fatal(err)
	}
	if mv := moving.Status.ServerMove; mv == nil || mv.To.Via != "secret/"+ns+"/own-pg/uri" || mv.Phase != memoryv1alpha1.ServerMoveCatchingUp {
		t.Errorf("status.serverMove = %+v while held, want CatchingUp to secret/%s/own-pg/uri", mv, ns)
	}
	e.setDatabase(t, ns, func(d *memoryv1alpha1.DatabaseSpec) {
		d.ClusterConnection, d.ConnectionSecretRef = "main", nil
	})
	held.free()
	got := e.waitServerMove(t, ns, "bot", memoryv1alpha1.ServerMoveAborted)
	t.Logf("aborted: %s", got.Status.ServerMove.Message)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionMoving, false, memoryv1alpha1.ReasonMoveAborted)
	if schemaIn(t, targetURL, schema) {
		t.Errorf("the incoming copy of %s is still on the target after the abort", schema)
	}
	if c := got.Status.Connection; c == nil || *c != from {
		t.Errorf("status.connection = %+v after the abort, want %+v", c, from)
	}
	if login, _ := e.tenantLogin(t, ns, "bot"); login != login0 {
		t.Error("the service's credentials changed during an aborted move")
	}
	if h := e.templateHash(t, ns, "bot"); h != hash0 {
		t.Errorf("pod template hash %s → %s during an aborted move", hash0, h)
	}
	if err := moveInsert(login0, schema, "written after the abort"); err != nil {
		t.Errorf("the source takes no write after the abort: %v", err)
	}
	e.deleteAndWait(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}})
}

// scenarioServerMoveFreezeTooLong: an operator stuck longer than
// --move-freeze-timeout (15 s here) after freezing the source lifts the
// freeze (event MoveFreezeTooLong), catches up again, and switches with a
// second, short freeze.
func scenarioServerMoveFreezeTooLong(e *operatorEnv, t *testing.T) {
	m := e.startMove(t, moveSetup{instance: "srvmovefreeze", ns: "srvfreeze", connPrefix: "moveto-", rows: moveRows})
	ns, schema, targetURL := m.ns, m.schema, m.targetURL

	held := e.faults.holds.add(m.key, "move source frozen")
	since := time.Now()
	e.moveTo(t, ns, m.targetConn)
	reachHold(t, held, "froze the source")
	if err := moveInsert(m.login0, schema, "written while frozen"); err == nil {
		t.Error("the login role wrote on the frozen source")
	}
	time.Sleep(16 * time.Second)
	held.free()
	e.waitEventSince(t, ns, "bot", memoryv1alpha1.ReasonMoveFreezeTooLong, "move-freeze-timeout", since)
	got := e.waitServerMove(t, ns, "bot", memoryv1alpha1.ServerMoveSwitched)
	if mv := got.Status.ServerMove; mv.FreezeMillis <= 0 || mv.FreezeMillis >= 15000 {
		t.Errorf("the switch's freeze lasted %d ms, want the second, short one", mv.FreezeMillis)
	}
	e.deleteAndWait(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}})
	if schemaIn(t, targetURL, schema) || schemaIn(t, e.adminURL, schema) {
		t.Errorf("schema %s left behind after deleting the moved runtime (reclaimPolicy Delete)", schema)
	}
}

// scenarioServerMoveSourceUnknown: a runtime whose status.connection has
// no via (recorded by an earlier release) that changes its connection with
// onChange: Move is refused (DatabaseReady False, MoveSourceUnknown,
// Stalled), nothing is created on the other server, the service keeps its
// credentials; set back, it records via and runs again.
func scenarioServerMoveSourceUnknown(e *operatorEnv, t *testing.T) {
	m := e.startMove(t, moveSetup{instance: "srvmovesrc", ns: "srvunknown", connPrefix: "moveto-"})
	ns, schema, targetURL, login0 := m.ns, m.schema, m.targetURL, m.login0
	forget := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/status/connection/via"}]`))
	if err := e.c.Status().Patch(testContext(t), &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, forget); err != nil {
		t.Fatal(err)
	}
	e.moveTo(t, ns, m.targetConn)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonMoveSourceUnknown)
	if msg := got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message; !strings.Contains(msg, "set spec.database back") {
		t.Errorf("MoveSourceUnknown message %q does not say what to do", msg)
	}
	if s := got.GetCondition(memoryv1alpha1.ConditionStalled); s == nil || s.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v, want True", s)
	}
	if got.Status.ServerMove != nil || schemaIn(t, targetURL, schema) {
		t.Errorf("a move began without its source: status.serverMove %+v, schema on the target: %v", got.Status.ServerMove, schemaIn(t, targetURL, schema))
	}
	if login, _ := e.tenantLogin(t, ns, "bot"); login != login0 {
		t.Error("the service's credentials changed")
	}
	e.moveTo(t, ns, "main")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if c := got.Status.Connection; c == nil || c.Via != "cluster/main" {
		t.Errorf("status.connection = %+v once set back, want via cluster/main", c)
	}
	e.deleteAndWait(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}})
}
