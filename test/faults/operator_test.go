package faults

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestOperatorRetriesThroughAnOutage: PostgreSQL is killed (-9) while the
// operator's statement waits for a lock (the moment pgx gets a connection
// closed without a word). The operator does not crash: the runtime's
// condition says DatabaseUnreachable — every Warning event of the outage
// has that reason, none a provisioning failure — and once PostgreSQL is
// back the operator finishes the work by itself (here a credentials
// rotation) and the runtime is DatabaseReady again.
func TestOperatorRetriesThroughAnOutage(t *testing.T) {
	in := testenv.NewInstance(t, "faults")
	adminURL := in.Start(t)
	_, cfg := testenv.ControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := demo.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("outage-%d", time.Now().UnixNano()%1e6)
	if err := demo.Prepare(ctx, c, adminURL, "", ns); err != nil {
		t.Fatal(err)
	}
	opCtx, stopOperator := context.WithCancel(ctx)
	// The operator logs every failed reconcile of the outage at error
	// level: expected here, so shown only when the test fails.
	opLog := &syncBuffer{}
	opDone, err := demo.StartOperator(opCtx, cfg, slog.New(slog.NewTextHandler(opLog, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopOperator()
		<-opDone
		if t.Failed() {
			t.Logf("operator log (errors):\n%s", opLog.String())
		}
	})

	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: demo.ConnectionName}}}
	if err := c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	waitRuntime(ctx, t, c, rt, "DatabaseReady", func(r *memoryv1alpha1.MemoryRuntime) bool {
		cond := r.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
		return cond != nil && cond.Status == metav1.ConditionTrue && r.Status.Schema != ""
	})
	t.Cleanup(func() {
		admin := testenv.NewPool(t, adminURL, 1)
		owner := tenant.Owner{UID: string(rt.UID), Namespace: ns, Name: rt.Name}
		if _, err := tenant.Drop(context.Background(), admin, rt.Status.Schema, owner); err != nil {
			t.Logf("dropping %s: %v", rt.Status.Schema, err)
		}
	})

	// The rotation verifies the tenant first, under its provisioning lease:
	// hold the lease's row, so the operator's statement waits for it.
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{tenant.ControlSchema, "provision_locks"}.Sanitize()+` WHERE schema_name = $1 FOR UPDATE`, rt.Status.Schema); err != nil {
		t.Fatal(err)
	}
	since := metav1.NowMicro()
	patch := client.MergeFrom(rt.DeepCopy())
	metav1.SetMetaDataAnnotation(&rt.ObjectMeta, naming.AnnotationRotateCredentials, "outage")
	if err := c.Patch(ctx, rt, patch); err != nil {
		t.Fatal(err)
	}
	waitForLockWaiters(ctx, t, adminURL, 1)
	in.Fault(t, "kill")
	waitRuntime(ctx, t, c, rt, "DatabaseUnreachable while PostgreSQL is down", func(r *memoryv1alpha1.MemoryRuntime) bool {
		cond := r.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == memoryv1alpha1.ReasonDatabaseUnreachable
	})
	time.Sleep(outage)
	in.Start(t)
	waitRuntime(ctx, t, c, rt, "the rotation done and DatabaseReady after the restart", func(r *memoryv1alpha1.MemoryRuntime) bool {
		cond := r.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
		return r.Status.RotatedCredentials == "outage" && cond != nil && cond.Status == metav1.ConditionTrue
	})
	select {
	case err := <-opDone:
		t.Fatalf("the operator stopped during the outage: %v", err)
	default:
	}

	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var unreachable int
	for _, ev := range events.Items {
		if ev.Regarding.Name != rt.Name || ev.Type != "Warning" || ev.EventTime.Before(&since) {
			continue
		}
		if ev.Reason != memoryv1alpha1.ReasonDatabaseUnreachable {
			t.Errorf("a Warning event of the outage says %s, not %s: %s", ev.Reason, memoryv1alpha1.ReasonDatabaseUnreachable, ev.Note)
			continue
		}
		unreachable++
	}
	if unreachable == 0 {
		t.Errorf("no %s Warning event about the outage", memoryv1alpha1.ReasonDatabaseUnreachable)
	}
}

// waitRuntime polls the runtime until done holds for it (2 min at most).
func waitRuntime(ctx context.Context, t *testing.T, c client.Client, rt *memoryv1alpha1.MemoryRuntime, what string, done func(*memoryv1alpha1.MemoryRuntime) bool) {
	t.Helper()
	deadline := time.Now().Add(phaseLimit)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rt), rt); err != nil {
			t.Fatal(err)
		}
		if done(rt) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; conditions %+v", what, phaseLimit, rt.Status.Conditions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
