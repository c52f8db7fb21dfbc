package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestDemoTakesOverItsEarlierStore: the samples' runtime of an earlier
// demo left its schema in PostgreSQL (reclaimPolicy Retain) and is gone
// from the cluster, as after `make demo-node` on a node started afresh, or
// `make demo` after `make demo-node`. The operator refuses the new runtime
// of the same name the schema (SchemaOwnedByOther, Stalled): the scenario
// says so at once instead of timing out, and the demo (TakeOverEarlier)
// takes the store over with the adopt-from-uid annotation and tells its
// whole story.
//
// The control plane here has no garbage collector: the test removes the
// deleted runtime's objects itself, as a cluster's would.
func TestDemoTakesOverItsEarlierStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startDemoEnv(t, ctx)
	samples := filepath.Join(testenv.RepoRoot(), "config", "samples")
	if _, err := demo.ApplySamples(ctx, e.c, samples, e.ns); err != nil {
		t.Fatal(err)
	}
	earlier := &memoryv1alpha1.MemoryRuntime{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "support-bot"}, earlier); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(earlier.Status.Conditions, memoryv1alpha1.ConditionReady), nil
	})
	if err != nil {
		t.Fatalf("the earlier support-bot not Ready: %v", err)
	}
	if err := e.c.Delete(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(earlier), &memoryv1alpha1.MemoryRuntime{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the earlier support-bot did not go: %v", err)
	}
	e.collectGarbage(t, ctx, "support-bot")

	sc := e.scenario(t)
	start := time.Now()
	_, err = sc.Run(ctx)
	var stalled *demo.StalledError
	if !errors.As(err, &stalled) || stalled.Reason != memoryv1alpha1.ReasonSchemaOwnedByOther {
		t.Fatalf("without TakeOverEarlier: %v, want a StalledError (SchemaOwnedByOther)", err)
	}
	if took := time.Since(start); took >= sc.Wait {
		t.Errorf("the Stalled runtime was reported after %s, the whole wait (%s)", took, sc.Wait)
	}
	t.Logf("without TakeOverEarlier, after %s: %v", time.Since(start).Round(100*time.Millisecond), err)

	sc = e.scenario(t)
	sc.TakeOverEarlier = true
	r, err := sc.Run(ctx)
	if err != nil {
		t.Fatalf("with TakeOverEarlier: %v", err)
	}
	var rt memoryv1alpha1.MemoryRuntime
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "support-bot"}, &rt); err != nil {
		t.Fatal(err)
	}
	if r.Schema != earlier.Status.Schema || r.Owner.UID != string(rt.UID) || rt.UID == earlier.UID {
		t.Errorf("the story ran on schema %s as %s, want the earlier schema %s taken over by the new runtime %s", r.Schema, r.Owner.UID, earlier.Status.Schema, rt.UID)
	}
	if r.ActiveAlice != 6 || r.LastRun == nil {
		t.Errorf("the samples' story did not run through: alice has %d memories, last run %+v", r.ActiveAlice, r.LastRun)
	}
}

// collectGarbage deletes the objects the operator made for a deleted
// runtime (its labels), which a cluster's garbage collector would remove.
func (e *demoEnv) collectGarbage(t *testing.T, ctx context.Context, runtime string) {
	t.Helper()
	sel := client.MatchingLabels{naming.LabelInstance: runtime}
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &networkingv1.NetworkPolicy{}, &policyv1.PodDisruptionBudget{}} {
		if err := e.c.DeleteAllOf(ctx, obj, client.InNamespace(e.ns), sel); err != nil {
			t.Fatalf("deleting the %T of the deleted %s: %v", obj, runtime, err)
		}
	}
	// A Service takes no DeleteAllOf (deletecollection) in every release.
	var svcs corev1.ServiceList
	if err := e.c.List(ctx, &svcs, client.InNamespace(e.ns), sel); err != nil {
		t.Fatal(err)
	}
	for i := range svcs.Items {
		if err := e.c.Delete(ctx, &svcs.Items[i]); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}
