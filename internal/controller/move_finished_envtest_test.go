package controller

import (
	"context"
	"testing"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioServerMoveFinishedThenLate (review 14, H1): the operator runs
// Finish (the target becomes this runtime's home-marked copy, its row map
// gone) and dies before the switch's status patch; it comes back only
// after --move-freeze-timeout (15 s in the suite). Lifting the freeze then
// would let writes land on the source that no catch-up can bring over any
// more: the operator must instead verify and switch, the source frozen
// throughout.
func scenarioServerMoveFinishedThenLate(e *operatorEnv, t *testing.T) {
	m := e.startMove(t, moveSetup{instance: "movelate", ns: "movelate", connPrefix: "movelate-", retain: true, rows: moveRows})
	ns, schema, targetURL, targetConn, login, rt := m.ns, m.schema, m.targetURL, m.targetConn, m.login0, m.rt

	held := e.faults.holds.add(m.key, "move source frozen")
	since := time.Now()
	e.moveTo(t, ns, targetConn)
	reachHold(t, held, "froze the source")
	// What the operator did next, up to a crash before the switch patch.
	ctx := context.Background()
	src, dst := testenv.NewPool(t, e.adminURL, 2), testenv.NewPool(t, targetURL, 2)
	rel := tenant.Relocation{Schema: schema, Owner: TenantOwner(rt), Source: src, Target: dst}
	if _, err := rel.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	if _, err := rel.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := rel.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	time.Sleep(16 * time.Second) // the operator comes back after the suite's MoveFreezeTimeout (15 s)
	held.free()

	moved := e.waitServerMove(t, ns, "bot", memoryv1alpha1.ServerMoveSwitched)
	if moved.Status.Connection == nil || moved.Status.Connection.Via != "cluster/"+targetConn {
		t.Fatalf("switched, but status.connection is %+v, want via cluster/%s", moved.Status.Connection, targetConn)
	}
	if got := moved.Status.ServerMove.FreezesLifted; got != 0 {
		t.Errorf("freezesLifted = %d: a freeze past Finish was lifted", got)
	}
	for _, ev := range e.events(t, ns, "bot") {
		if ev.Reason == memoryv1alpha1.ReasonMoveFreezeTooLong && !ev.EventTime.Time.Before(since.Truncate(time.Microsecond)) {
			t.Errorf("the freeze past Finish was lifted: event %s %q", ev.Reason, ev.Note)
		}
	}
	if err := moveInsert(login, schema, "written on the old copy after the switch"); err == nil {
		t.Error("the old copy took a write after the switch: its freeze was lifted")
	}
	srcRows, srcSum := moveChecksum(t, e.adminURL, schema)
	dstRows, dstSum := moveChecksum(t, targetURL, schema)
	if srcRows != dstRows || srcSum != dstSum {
		t.Errorf("after the switch the copies differ: source %d rows %s, target %d rows %s", srcRows, srcSum, dstRows, dstSum)
	}
}
