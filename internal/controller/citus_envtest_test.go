package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
		eventually(t, "the Citus runtime is gone", 30*time.Second, func() error {
			if err := e.get(t, ns, "bot", &memoryv1alpha1.MemoryRuntime{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
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
}
