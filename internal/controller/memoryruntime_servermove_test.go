package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

func moveRuntime(onChange memoryv1alpha1.DatabaseOnChange, specConn, via string, mv *memoryv1alpha1.ServerMoveStatus) *memoryv1alpha1.MemoryRuntime {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "bot"}}
	rt.Spec.Database = memoryv1alpha1.DatabaseSpec{ClusterConnection: specConn, OnChange: onChange}
	if via != "" {
		rt.Status.Connection = &memoryv1alpha1.RuntimeConnection{Database: "db", DatabaseOID: 1, Via: via}
	}
	rt.Status.ServerMove = mv
	return rt
}

// TestServerMoveConnection: which connection a runtime's reconcile uses
// (connectionID) and which move it asks for (moveTarget), around a move.
func TestServerMoveConnection(t *testing.T) {
	running := &memoryv1alpha1.ServerMoveStatus{Phase: memoryv1alpha1.ServerMoveFrozen,
		From: memoryv1alpha1.RuntimeConnection{Via: "cluster/old"}, To: memoryv1alpha1.RuntimeConnection{Via: "cluster/new"}}
	switched := running.DeepCopy()
	switched.Phase = memoryv1alpha1.ServerMoveSwitched
	for _, c := range []struct {
		name       string
		rt         *memoryv1alpha1.MemoryRuntime
		connection string
		target     string // "" when no move is asked for
	}{
		{"Refuse keeps today's behaviour: the spec's connection", moveRuntime("", "new", "cluster/old", nil), "cluster/new", ""},
		{"Refuse explicitly", moveRuntime(memoryv1alpha1.OnChangeRefuse, "new", "cluster/old", nil), "cluster/new", ""},
		{"Move: the recorded connection until the switch", moveRuntime(memoryv1alpha1.OnChangeMove, "new", "cluster/old", nil), "cluster/old", "cluster/new"},
		{"Move without via: the spec's (checkConnection refuses MoveSourceUnknown)", moveRuntime(memoryv1alpha1.OnChangeMove, "new", "", nil), "cluster/new", ""},
		{"Move, unchanged spec", moveRuntime(memoryv1alpha1.OnChangeMove, "old", "cluster/old", nil), "cluster/old", ""},
		{"a running move keeps its source after the spec is set back", moveRuntime(memoryv1alpha1.OnChangeMove, "old", "cluster/old", running), "cluster/old", ""},
		{"a running move keeps its source when onChange goes back to Refuse", moveRuntime(memoryv1alpha1.OnChangeRefuse, "new", "cluster/old", running), "cluster/old", ""},
		{"switched: the new home", moveRuntime(memoryv1alpha1.OnChangeMove, "new", "cluster/new", switched), "cluster/new", ""},
	} {
		if got := connectionID(c.rt); got != c.connection {
			t.Errorf("%s: connectionID = %q, want %q", c.name, got, c.connection)
		}
		target, wanted := moveTarget(c.rt)
		if wanted != (c.target != "") || target != c.target {
			t.Errorf("%s: moveTarget = %q, %v; want %q", c.name, target, wanted, c.target)
		}
	}
}

// TestViaDatabase: a recorded connection names a clusterConnection or a
// Secret of the runtime's own namespace, nothing else.
func TestViaDatabase(t *testing.T) {
	rt := moveRuntime(memoryv1alpha1.OnChangeMove, "x", "", nil)
	db, err := viaDatabase(rt, "cluster/pg-a")
	if err != nil || db.ClusterConnection != "pg-a" || db.ConnectionSecretRef != nil {
		t.Errorf("cluster/pg-a: %+v, %v", db, err)
	}
	db, err = viaDatabase(rt, "secret/team/own-pg/uri")
	if err != nil || db.ClusterConnection != "" || db.ConnectionSecretRef == nil || db.ConnectionSecretRef.Name != "own-pg" || db.ConnectionSecretRef.Key != "uri" {
		t.Errorf("secret/team/own-pg/uri: %+v, %v", db, err)
	}
	for _, bad := range []string{"secret/other/own-pg/uri", "secret/team/own-pg", "database/db1", "cluster/", ""} {
		if _, err := viaDatabase(rt, bad); err == nil || reasonOf(err, "") != memoryv1alpha1.ReasonConnectionInvalid {
			t.Errorf("%q: err = %v, want ConnectionInvalid", bad, err)
		}
	}
}

// TestMovingFact: the Moving condition of each phase.
func TestMovingFact(t *testing.T) {
	if movingFact(nil) != nil {
		t.Error("no move: a Moving condition")
	}
	for phase, want := range map[string]struct {
		status bool
		reason string
	}{
		memoryv1alpha1.ServerMovePreparing:  {true, memoryv1alpha1.ReasonMoveInProgress},
		memoryv1alpha1.ServerMoveCopying:    {true, memoryv1alpha1.ReasonMoveInProgress},
		memoryv1alpha1.ServerMoveCatchingUp: {true, memoryv1alpha1.ReasonMoveInProgress},
		memoryv1alpha1.ServerMoveFrozen:     {true, memoryv1alpha1.ReasonMoveInProgress},
		memoryv1alpha1.ServerMoveSwitched:   {false, memoryv1alpha1.ReasonMoved},
		memoryv1alpha1.ServerMoveConfirmed:  {false, memoryv1alpha1.ReasonMoveConfirmed},
		memoryv1alpha1.ServerMoveAborted:    {false, memoryv1alpha1.ReasonMoveAborted},
		memoryv1alpha1.ServerMoveFailed:     {false, memoryv1alpha1.ReasonMoveFailed},
	} {
		got := movingFact(&memoryv1alpha1.ServerMoveStatus{Phase: phase, Run: 2})
		if got.status != want.status || got.reason != want.reason {
			t.Errorf("%s: %+v, want %+v", phase, *got, want)
		}
		if memoryv1alpha1.ServerMoveRunning(phase) != want.status {
			t.Errorf("%s: ServerMoveRunning = %v", phase, !want.status)
		}
	}
}
