package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// scenarioServerMovePausedWhileFrozen (review 14, M2): a runtime paused
// while its move holds the source frozen, by an operator that then dies,
// gets its writes back after --move-freeze-timeout (15 s here) although no
// move step runs while paused: the freeze is lifted (MoveFreezeTooLong,
// phase CatchingUp), the runtime stays paused, and once unpaused the move
// catches up and switches.
func scenarioServerMovePausedWhileFrozen(e *operatorEnv, t *testing.T) {
	m := e.startMove(t, moveSetup{instance: "movepaused", ns: "movepaused", connPrefix: "movepaused-", rows: moveRows})
	obj := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: "bot"}}
	// Stopped right after the freeze, then killed there.
	held := e.faults.holds.add(m.key, "move source frozen")
	e.faults.arm(m.key, "move source frozen", nil)
	since := time.Now()
	e.moveTo(t, m.ns, m.targetConn)
	reachHold(t, held, "froze the source")
	if err := moveInsert(m.login0, m.schema, "written while frozen"); err == nil {
		t.Error("the login role wrote on the frozen source")
	}
	update(t, e, obj, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Paused = true })
	held.free()

	// Paused: no move step runs, yet the freeze ends after its timeout.
	deadline := time.Now().Add(time.Minute)
	var err error
	for err = moveInsert(m.login0, m.schema, "written after the lift"); err != nil && time.Now().Before(deadline); err = moveInsert(m.login0, m.schema, "written after the lift") {
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the paused runtime's source stayed frozen %s after the freeze began: %v", time.Since(since).Round(time.Second), err)
	}
	t.Logf("writes resumed %s after the move began, the runtime paused", time.Since(since).Round(time.Second))
	e.waitEventSince(t, m.ns, "bot", memoryv1alpha1.ReasonMoveFreezeTooLong, "move-freeze-timeout", since)
	got := e.waitServerMove(t, m.ns, "bot", memoryv1alpha1.ServerMoveCatchingUp)
	if mv := got.Status.ServerMove; mv.FreezesLifted != 1 || !got.Spec.Paused {
		t.Errorf("after the lift: freezesLifted %d, paused %v; want 1 and still paused", mv.FreezesLifted, got.Spec.Paused)
	}

	update(t, e, obj, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Paused = false })
	moved := e.waitServerMove(t, m.ns, "bot", memoryv1alpha1.ServerMoveSwitched)
	srcRows, srcSum := moveChecksum(t, e.adminURL, m.schema)
	dstRows, dstSum := moveChecksum(t, m.targetURL, m.schema)
	if srcRows != dstRows || srcSum != dstSum || srcRows != moveRows+1 {
		t.Errorf("after the switch: source %d rows %s, target %d rows %s; want both %d rows (the write after the lift included)", srcRows, srcSum, dstRows, dstSum, moveRows+1)
	}
	t.Logf("switched after unpausing: freeze %d ms", moved.Status.ServerMove.FreezeMillis)
	e.deleteAndWait(t, obj)
	if schemaIn(t, m.targetURL, m.schema) || schemaIn(t, e.adminURL, m.schema) {
		t.Errorf("schema %s left behind after deleting the moved runtime (reclaimPolicy Delete)", m.schema)
	}
}
