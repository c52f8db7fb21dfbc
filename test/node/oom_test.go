package node

import (
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// oomLimit is below what `manager serve` needs to start (it runs in 12Mi
// here, not in 9Mi), so the kernel kills it within a second of each start:
// the test takes one or two restarts, not a load that grows into the limit.
const oomLimit = "8Mi"

// testOOM: a service Pod over its memory limit is OOM-killed by the kernel
// and restarted by the kubelet; the Pod's status says OOMKilled, and so
// does the runtime's ServiceAvailable condition. Raising the limit heals it.
func (e *env) testOOM(t *testing.T) {
	ctx := scenarioCtx(t, 5*time.Minute)
	ns := e.namespace(t, "oom")
	rt := newRuntime(ns, "tight", 1, oomLimit)
	if err := e.cl.c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	var restarts int32
	err := poll(ctx, time.Second, func() (bool, error) {
		for _, p := range e.servicePods(t, ns, "tight") {
			for _, cs := range p.Status.ContainerStatuses {
				if term := cs.LastTerminationState.Terminated; term != nil && term.Reason == "OOMKilled" && cs.RestartCount >= 1 {
					restarts = cs.RestartCount
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no OOMKilled restart with a %s limit: %v\n%s", oomLimit, err, e.cl.describePods(ns))
	}
	t.Logf("the service container was OOM-killed and restarted (%d restarts)", restarts)

	var cond string
	err = poll(ctx, time.Second, func() (bool, error) {
		if err := e.cl.c.Get(ctx, client.ObjectKeyFromObject(rt), rt); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(rt.Status.Conditions, memoryv1alpha1.ConditionServiceAvailable)
		if c == nil {
			return false, nil
		}
		cond = c.Reason + ": " + c.Message
		return c.Status == "False" && strings.Contains(c.Message, "OOMKilled"), nil
	})
	if err != nil {
		t.Errorf("ServiceAvailable does not tell the memory limit is too low: %v (last: %q)", err, cond)
	} else {
		t.Logf("ServiceAvailable: %s", cond)
	}

	patch := []byte(`{"spec":{"service":{"resources":{"limits":{"memory":"256Mi"}}}}}`)
	if err := e.cl.c.Patch(ctx, rt, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	e.waitReady(t, ns, "tight")
}
