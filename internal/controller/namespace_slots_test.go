package controller

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestNamespaceSlots: one holder per namespace, other namespaces free, and
// giving the slot back queues one runtime that waited for it, the next
// give the next one, each once.
func TestNamespaceSlots(t *testing.T) {
	n := newNamespaceSlots()
	a1, a2, a3 := types.NamespacedName{Namespace: "a", Name: "1"}, types.NamespacedName{Namespace: "a", Name: "2"}, types.NamespacedName{Namespace: "a", Name: "3"}
	b1 := types.NamespacedName{Namespace: "b", Name: "1"}
	if !n.take(a1) || !n.take(b1) {
		t.Fatal("the first runtime of a namespace did not get its slot")
	}
	if n.take(a2) || n.take(a3) || n.take(a2) {
		t.Fatal("a second runtime of a busy namespace got a slot")
	}
	n.give(a2) // not the holder: nothing happens
	if len(n.wake) != 0 || n.take(a3) {
		t.Fatal("a runtime that does not hold the slot gave it back")
	}
	woken := map[types.NamespacedName]int{}
	for _, holder := range []types.NamespacedName{a1, {}} {
		if holder == (types.NamespacedName{}) {
			holder = (<-n.wake).Object // the one woken before takes the slot
			woken[holder]++
			if !n.take(holder) {
				t.Fatalf("the woken waiter %s did not take the slot", holder)
			}
		}
		n.give(holder)
		if len(n.wake) != 1 {
			t.Fatalf("giving %s's slot back queued %d waiters, want 1", holder, len(n.wake))
		}
	}
	woken[(<-n.wake).Object]++
	if len(woken) != 2 || woken[a2] != 1 || woken[a3] != 1 {
		t.Fatalf("two gives woke %v; want a/2 and a/3 once each", woken)
	}
	n.give(b1)
	if len(n.wake) != 0 {
		t.Fatal("giving back a slot nobody waited for woke someone")
	}
}

// TestWakeUpsOfOneNamespaceNeverCrowdOutAnother (issue 26's seventh
// review, L1, carried by the eighth): the wake-ups of every namespace share
// one channel of wakeBuffer. A namespace with more waiting runtimes than
// that filled it when its holder gave the slot back, and another
// namespace's wake-up was dropped (it came back after namespaceBusyRetry).
// A give now queues one waiter only, the one that will take the slot.
func TestWakeUpsOfOneNamespaceNeverCrowdOutAnother(t *testing.T) {
	n := newNamespaceSlots()
	a0, b0 := types.NamespacedName{Namespace: "a", Name: "holder"}, types.NamespacedName{Namespace: "b", Name: "holder"}
	b1 := types.NamespacedName{Namespace: "b", Name: "waiter"}
	if !n.take(a0) || !n.take(b0) {
		t.Fatal("the first runtime of a namespace did not get its slot")
	}
	for i := range wakeBuffer + 100 {
		n.take(types.NamespacedName{Namespace: "a", Name: fmt.Sprint(i)})
	}
	n.take(b1)
	n.give(a0)
	n.give(b0)
	queued := map[string]int{}
	var bWoken bool
	for len(n.wake) > 0 {
		w := (<-n.wake).Object
		queued[w.Namespace]++
		bWoken = bWoken || w == b1
	}
	if !bWoken || queued["a"] != 1 {
		t.Fatalf("after a's and b's holders gave their slots back, b's waiter was queued: %v, a's queued %d (want true, 1)", bWoken, queued["a"])
	}
}

// TestNamespaceSlotsWakeTheLongestWaiter (TestOperator/Databases flake
// under load): a give queues the waiter that began to wait first, so each
// of a namespace's runtimes gets the slot in its turn. Before, a waiter
// drawn at random could lose every draw: bot-0 of ten runtimes created
// together had no pass for over a minute while the others took the slot.
// A waiter that asks again (its namespaceBusyRetry) keeps its turn.
func TestNamespaceSlotsWakeTheLongestWaiter(t *testing.T) {
	n := newNamespaceSlots()
	holder := types.NamespacedName{Namespace: "a", Name: "holder"}
	if !n.take(holder) {
		t.Fatal("the first runtime of a namespace did not get its slot")
	}
	var order []types.NamespacedName
	for _, name := range []string{"bot-7", "bot-2", "bot-9", "bot-0", "bot-5", "bot-3", "bot-8", "bot-1", "bot-6", "bot-4"} {
		w := types.NamespacedName{Namespace: "a", Name: name}
		order = append(order, w)
		if n.take(w) {
			t.Fatalf("%s got a busy namespace's slot", w)
		}
	}
	for _, w := range order { // every waiter asks again: no one loses its turn
		n.take(w)
	}
	for i, want := range order {
		n.give(holder)
		if len(n.wake) != 1 {
			t.Fatalf("give %d queued %d waiters, want 1", i, len(n.wake))
		}
		holder = (<-n.wake).Object
		if holder != want {
			t.Fatalf("give %d woke %s, want %s (waiting since turn %d)", i, holder, want, i+1)
		}
		if !n.take(holder) {
			t.Fatalf("the woken waiter %s did not take the slot", holder)
		}
	}
	n.give(holder)
	if len(n.wake) != 0 || len(n.waiting) != 0 {
		t.Fatalf("after every waiter's turn: %d queued, waiting %v", len(n.wake), n.waiting)
	}
}
