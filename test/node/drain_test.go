package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// drainTimeout is how long the refused drain keeps trying: kubectl retries
// a refused eviction every 5 s, so it tries a few times.
const drainTimeout = "20s"

// testDrain: a runtime of two replicas gets a PodDisruptionBudget
// (maxUnavailable 1), and `kubectl drain` of the node its Pods run on
// evicts one of them and is refused the other (its replacement cannot
// start on the cordoned node, so evicting the second would leave none):
// the drain times out, one Pod keeps serving a writing client throughout
// (no call fails), and after uncordon both replicas are back with no
// acknowledged write lost.
func (e *env) testDrain(t *testing.T) {
	ctx := scenarioCtx(t, 6*time.Minute)
	ns := e.namespace(t, "drain")
	rt := newRuntime(ns, "drained", 2, "256Mi")
	if err := e.cl.c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	e.waitReady(t, ns, "drained")
	e.waitAvailable(t, ns, "drained", 2)
	pdb := e.waitDisruptionsAllowed(t, ctx, ns, "drained", 1)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want 1", pdb.Name, pdb.Spec.MaxUnavailable)
	}
	pods := e.servicePods(t, ns, "drained")
	node := pods[0].Spec.NodeName
	if slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName != node }) {
		// A user's cluster spread them (the operator's anti-affinity): a
		// drain of one node then evicts one Pod and nothing blocks.
		t.Skipf("the two Pods run on different nodes; the refusal needs them on one")
	}
	s := e.service(t, ns, "drained")
	load := startLoad(ctx, s, "drain")
	defer load.stop()
	if err := load.waitFor(ctx, 5); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { e.uncordon(t, node) })
	start := time.Now()
	sel := labels.SelectorFromSet(naming.SelectorLabels("drained")).String()
	out, err := e.cl.kubectl(ctx, "drain", node, "--pod-selector", sel, "--ignore-daemonsets", "--delete-emptydir-data",
		"--timeout", drainTimeout)
	if err == nil {
		t.Fatalf("kubectl drain %s evicted both Pods of a 2-replica runtime under its PodDisruptionBudget:\n%s", node, out)
	}
	if !strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("kubectl drain failed, but not on the disruption budget: %v\n%s", err, out)
	}
	t.Logf("kubectl drain gave up after %s: %s", time.Since(start).Round(time.Second), lastLine(err.Error()))
	left := slices.DeleteFunc(e.servicePods(t, ns, "drained"), func(p corev1.Pod) bool { return p.Spec.NodeName == "" })
	if len(left) != 1 || !podReady(&left[0]) {
		t.Errorf("after the refused drain: %d scheduled service Pods (%v), want 1 Ready\n%s", len(left), podNames(left), e.cl.describePods(ns))
	}
	if err := load.waitFor(ctx, load.ok()+10); err != nil {
		t.Errorf("the remaining Pod does not serve: %v", err)
	}

	e.uncordon(t, node)
	e.waitAvailable(t, ns, "drained", 2)
	if err := load.waitFor(ctx, load.ok()+10); err != nil {
		t.Fatal(err)
	}
	load.stop()
	if f := load.failures(); len(f) > 0 {
		t.Errorf("%d calls failed while a Pod was evicted: %v", len(f), f)
	}
	load.checkAcked(t, ctx, s, "drain")
}

// waitDisruptionsAllowed waits until the runtime's PodDisruptionBudget
// allows n disruptions (the disruption controller counted the Pods).
func (e *env) waitDisruptionsAllowed(t *testing.T, ctx context.Context, ns, name string, n int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.PodDisruptionBudgetName(name)}, pdb)
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == n, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("PodDisruptionBudget %s/%s: %v (status %+v)", ns, name, err, pdb.Status)
	}
	return pdb
}

// uncordon makes the node schedulable again (idempotent).
func (e *env) uncordon(t *testing.T, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := e.cl.kubectl(ctx, "uncordon", node); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
