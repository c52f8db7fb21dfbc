package controller

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// holdLimit bounds a hold, so a failing test never leaves the suite's
// operator with a worker stuck for good.
const holdLimit = time.Minute

// holds lets a test stop a runtime's reconcile at a step of
// Options.FailAfter (without a fault) until it releases it: the test
// occupies the operator's workers, and what it creates meanwhile waits in
// the queue in a known order. The zero value holds nothing.
type holds struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*hold
	// seen counts the steps each runtime passed (every one, held or not).
	seen map[types.NamespacedName]map[string]int
}

type hold struct {
	step    string
	reached chan struct{} // closed when the reconcile stops at step
	release chan struct{}
	once    sync.Once
}

// add arms one hold of key at step.
func (h *holds) add(key types.NamespacedName, step string) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[types.NamespacedName]*hold{}
	}
	x := &hold{step: step, reached: make(chan struct{}), release: make(chan struct{})}
	h.m[key] = x
	return x
}

// wait is called by the fault injector at each step: it blocks an armed
// key's reconcile at its step until the hold is freed (at most holdLimit).
func (h *holds) wait(key types.NamespacedName, step string) {
	h.mu.Lock()
	if h.seen == nil {
		h.seen = map[types.NamespacedName]map[string]int{}
	}
	if h.seen[key] == nil {
		h.seen[key] = map[string]int{}
	}
	h.seen[key][step]++
	x := h.m[key]
	if x == nil || x.step != step {
		h.mu.Unlock()
		return
	}
	delete(h.m, key)
	h.mu.Unlock()
	close(x.reached)
	select {
	case <-x.release:
	case <-time.After(holdLimit):
	}
}

// passed is how many times key's reconciles passed step.
func (h *holds) passed(key types.NamespacedName, step string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[key][step]
}

func (x *hold) free() { x.once.Do(func() { close(x.release) }) }

// scenarioBegunRuntimeFirst (issue 32): a runtime whose first reconcile is
// done and that waits only for its Deployment is reconciled again before
// the runtimes queued behind it begin. Before, its first reconcile's own
// writes queued it again behind every runtime created before them, so with
// 1,000 created at once no runtime was Ready before all 1,000 had been
// provisioned once.
//
// The test holds every worker (a holder runtime each, stopped inside its
// provisioning), creates "first" and then 40 others, so all wait in the
// queue in that order, and lets the workers go. "first" is provisioned
// first; its Deployment is marked available as soon as it exists; when
// "first" is Ready, fewer than half of the 40 may have begun (their
// Deployment applied). Before the fix all 40 had.
func scenarioBegunRuntimeFirst(e *operatorEnv, t *testing.T) {
	const others, otherNamespaces = 40, 8
	var held []*hold
	releaseAll := func() {
		for _, h := range held {
			h.free()
		}
	}
	defer releaseAll()
	var created []client.ObjectKey // every runtime of the scenario, to wait for at its end
	defer func() { releaseAll(); e.waitProvisioned(t, created) }()
	for range e.runtimes.opts.RuntimeConcurrency {
		rt := newRuntime(e.newNamespace(t, "holder"), "holder", "")
		created = append(created, client.ObjectKeyFromObject(rt))
		held = append(held, e.faults.holds.add(client.ObjectKeyFromObject(rt), "granted"))
		e.createRuntime(t, rt)
	}
	for i, h := range held {
		select {
		case <-h.reached:
		case <-time.After(holdLimit):
			t.Fatalf("holder %d of %d never reached its provisioning's last step", i+1, len(held))
		}
	}

	nsFirst := e.newNamespace(t, "first")
	e.createRuntime(t, newRuntime(nsFirst, "first", ""))
	var nss []string
	for range otherNamespaces {
		nss = append(nss, e.newNamespace(t, "queued"))
	}
	for i := range others {
		rt := newRuntime(nss[i%otherNamespaces], fmt.Sprintf("later-%02d", i), "")
		created = append(created, client.ObjectKeyFromObject(rt))
		e.createRuntime(t, rt)
	}
	// Every one is queued once the operator's cache holds it (its event
	// handlers run as the cache takes it in).
	eventually(t, "the operator's cache holds every runtime", 30*time.Second, func() error {
		var list memoryv1alpha1.MemoryRuntimeList
		if err := e.mgr.GetCache().List(testContext(t), &list); err != nil {
			return err
		}
		n := 0
		for _, rt := range list.Items {
			if rt.Namespace == nsFirst || strings.HasPrefix(rt.Name, "later-") && strings.HasPrefix(rt.Namespace, "queued-") {
				n++
			}
		}
		if n < others+1 {
			return fmt.Errorf("%d of %d in the cache", n, others+1)
		}
		return nil
	})
	releaseAll()

	e.markAvailable(t, nsFirst, "first")
	e.waitCondition(t, nsFirst, "first", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	begun := 0
	for _, ns := range nss {
		var list appsv1.DeploymentList
		if err := e.c.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		begun += len(list.Items)
	}
	t.Logf("when the first runtime was Ready, %d of the %d queued behind it had begun", begun, others)
	// Its second reconcile came at once, often before the cache had its
	// first one's status: it must not provision the tenant again.
	if n := e.faults.holds.passed(client.ObjectKey{Namespace: nsFirst, Name: "first"}, "granted"); n != 1 {
		t.Errorf("the first runtime was provisioned %d times until Ready, want 1", n)
	}
	if begun >= others/2 {
		t.Errorf("%d of the %d runtimes queued behind the first had begun when it was Ready, want fewer than %d: its second reconcile waited behind their first", begun, others, others/2)
	}
}

// waitProvisioned waits until every runtime of keys has its tenant
// provisioned (DatabaseReady at its generation): a scenario that leaves
// runtimes still being provisioned would have the idle check, which runs
// after it, see their status writes on a busy machine.
func (e *operatorEnv) waitProvisioned(t *testing.T, keys []client.ObjectKey) {
	t.Helper()
	for _, k := range keys {
		e.waitCondition(t, k.Namespace, k.Name, memoryv1alpha1.ConditionDatabaseReady, true, "")
	}
}
