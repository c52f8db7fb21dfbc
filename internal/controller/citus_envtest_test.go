package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioCitus: a runtime whose clusterConnection is a Citus coordinator gets
// a distributed schema and reports its worker in status.citusWorker; the
// move-to-worker annotation moves it (status.citusMove Succeeded, the
// worker in status), and a target that is no worker is refused in
// status.citusMove (Failed, with why) while the runtime stays Ready.
func scenarioCitus(e *operatorEnv, t *testing.T) {
	citusURL := testenv.NewCitusDatabase(t)
	pool := testenv.NewPool(t, citusURL, 2)
	mustCreate(t, e.c, connectionSecret(e.opNS, "citus", citusURL))
	ns := e.newNamespace(t, "citus")
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Database.ClusterConnection = "citus"
	// Before the database is dropped: the runtime's roles live on the
	// Citus nodes, not on the main test server the other runtimes use.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.c.Delete(ctx, rt); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting the Citus runtime: %v", err)
		}
		waitRuntimeGone(t, e, ns, "bot", "the Citus runtime is gone")
		if _, err := tenant.Drop(ctx, pool, SchemaFor(rt), TenantOwner(rt)); err != nil {
			t.Logf("dropping the Citus tenant: %v", err)
		}
	})
	bot := e.readyRuntime(t, rt)
	c, err := tenant.DetectCitus(testContext(t), pool)
	if err != nil {
		t.Fatal(err)
	}
	from := bot.Status.CitusWorker
	if !slices.Contains(c.Workers, from) {
		t.Fatalf("status.citusWorker = %q, want one of %v", from, c.Workers)
	}
	to := c.Workers[0]
	if to == from {
		to = c.Workers[1]
	}

	move := func(target string) {
		update(t, e, bot, func(r *memoryv1alpha1.MemoryRuntime) {
			if r.Annotations == nil {
				r.Annotations = map[string]string{}
			}
			r.Annotations[naming.AnnotationMoveToWorker] = target
		})
	}
	history := e.watchMoves(t, ns, "bot")
	move(to)
	eventually(t, "the schema moved to "+to, 2*time.Minute, func() error {
		if err := e.get(t, ns, "bot", bot); err != nil {
			return err
		}
		if m := bot.Status.CitusMove; bot.Status.CitusWorker != to || m == nil || m.Result != memoryv1alpha1.CitusMoveSucceeded || m.From != from {
			return fmt.Errorf("status.citusWorker %q, citusMove %+v", bot.Status.CitusWorker, m)
		}
		return nil
	})
	if p, err := tenant.SchemaPlacement(testContext(t), pool, SchemaFor(bot)); err != nil || p.Worker != to {
		t.Fatalf("placement in the database: %+v, %v; want %s", p, err, to)
	}
	// Every status write of the move, in order: Running (with startedAt,
	// written before the move started), maybe progress, then Succeeded.
	var seen []memoryv1alpha1.CitusMoveStatus
	select {
	case seen = <-history:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch of the runtime never saw the move succeed")
	}
	if len(seen) < 2 || seen[0].Result != memoryv1alpha1.CitusMoveRunning || seen[0].StartedAt == nil || seen[0].FinishedAt != nil ||
		seen[0].From != from || seen[0].To != to {
		t.Fatalf("status.citusMove as the move went: %+v; want Running from %s to %s with startedAt first", seen, from, to)
	}
	last := seen[len(seen)-1]
	if last.Result != memoryv1alpha1.CitusMoveSucceeded || last.FinishedAt == nil || last.StartedAt == nil ||
		!last.StartedAt.Equal(seen[0].StartedAt) || last.FinishedAt.Before(last.StartedAt) {
		t.Fatalf("status.citusMove at the end: %+v; want Succeeded with the startedAt of Running (%v) and a finishedAt", last, seen[0].StartedAt)
	}
	for _, m := range seen[1 : len(seen)-1] {
		if m.Result != memoryv1alpha1.CitusMoveRunning || m.TotalBytes <= 0 {
			t.Errorf("status.citusMove between Running and Succeeded: %+v; want progress of a running move", m)
		}
	}
	t.Logf("status.citusMove as the move went: %d writes, the last %q", len(seen), last.Message)

	move("127.0.0.1:1")
	eventually(t, "the move to a non-worker is refused", time.Minute, func() error {
		if err := e.get(t, ns, "bot", bot); err != nil {
			return err
		}
		m := bot.Status.CitusMove
		if m == nil || m.To != "127.0.0.1:1" || m.Result != memoryv1alpha1.CitusMoveFailed || !strings.Contains(m.Message, "not an active worker") {
			return fmt.Errorf("citusMove %+v", m)
		}
		return nil
	})
	if bot.Status.CitusWorker != to {
		t.Fatalf("status.citusWorker %q after a refused move, want %q", bot.Status.CitusWorker, to)
	}
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// Other dimensions, even on a tenant without a vector: refused as a
	// model change is (no re-embed on Citus), the service keeps 384; set
	// back, Ready again.
	setDims := func(d int32) {
		update(t, e, bot, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Embedding.Dimensions = d })
	}
	setDims(768)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonEmbeddingChangeNeedsReembed)
	if msg := got.GetCondition(memoryv1alpha1.ConditionReady).Message; !strings.Contains(msg, "Citus") || !strings.Contains(msg, "768 dimensions") {
		t.Errorf("the refusal says %q; want it to name Citus and the 768 dimensions", msg)
	}
	if got.Status.Embedding == nil || got.Status.Embedding.Dimensions != 384 || got.Status.Reembed != nil {
		t.Errorf("after the refusal status.embedding = %+v, status.reembed = %+v; want 384 and no re-embed", got.Status.Embedding, got.Status.Reembed)
	}
	if d := e.serviceConfig(t, ns, "bot").Embedding.Dimensions; d != 384 {
		t.Errorf("the service config names %d dimensions after the refusal, want 384", d)
	}
	setDims(384)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
}

// watchMoves watches runtime ns/name from now on and sends, once
// status.citusMove is Succeeded, every distinct status.citusMove it was
// written with, in order (a watch sees every write, however quick).
func (e *operatorEnv) watchMoves(t *testing.T, ns, name string) <-chan []memoryv1alpha1.CitusMoveStatus {
	t.Helper()
	wc, err := client.NewWithWatch(e.mgr.GetConfig(), client.Options{Scheme: e.mgr.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(testContext(t), &memoryv1alpha1.MemoryRuntimeList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	out := make(chan []memoryv1alpha1.CitusMoveStatus, 1)
	go func() {
		var seen []memoryv1alpha1.CitusMoveStatus
		for ev := range w.ResultChan() {
			rt, ok := ev.Object.(*memoryv1alpha1.MemoryRuntime)
			if !ok || rt.Status.CitusMove == nil {
				continue
			}
			m := *rt.Status.CitusMove.DeepCopy()
			if n := len(seen); n == 0 || !equality.Semantic.DeepEqual(seen[n-1], m) {
				seen = append(seen, m)
			}
			if m.Result == memoryv1alpha1.CitusMoveSucceeded {
				out <- seen
				return
			}
		}
	}()
	return out
}

// scenarioCitusWorkerRefused: a runtime whose clusterConnection is a Citus
// worker, not the coordinator, is refused at provisioning: DatabaseReady
// False with reason CitusUnsupported naming the worker node, kstatus Failed
// (Stalled: a human must point it at the coordinator), nothing created.
func scenarioCitusWorkerRefused(e *operatorEnv, t *testing.T) {
	citusURL := testenv.NewCitusDatabase(t)
	workerURL := testenv.CitusWorkerURLs(t, citusURL)[0]
	mustCreate(t, e.c, connectionSecret(e.opNS, "citus-worker", workerURL))
	ns := e.newNamespace(t, "citus-worker")
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Database.ClusterConnection = "citus-worker"
	mustCreate(t, e.c, rt)
	// Before the database is dropped: the runtime's finalizer connects to it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.c.Delete(ctx, rt); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting the runtime on the Citus worker: %v", err)
		}
		waitRuntimeGone(t, e, ns, "bot", "the runtime on the Citus worker is gone")
	})
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonCitusUnsupported)
	if msg := got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message; !strings.Contains(msg, "worker node") {
		t.Errorf("DatabaseReady message %q, want it to name the worker node", msg)
	}
	e.waitKStatus(t, rt, status.FailedStatus, memoryv1alpha1.ReasonCitusUnsupported)
	if schemaIn(t, workerURL, SchemaFor(got)) {
		t.Errorf("schema %s created on the worker despite the refusal", SchemaFor(got))
	}
}
