package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestNamespaceSlots: one holder per namespace, other namespaces free, and
// giving the slot back queues every runtime that waited for it, once.
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
	n.give(a1)
	woken := map[types.NamespacedName]int{}
	for len(n.wake) > 0 {
		woken[(<-n.wake).Object]++
	}
	if len(woken) != 2 || woken[a2] != 1 || woken[a3] != 1 {
		t.Fatalf("giving a's slot back woke %v; want a/2 and a/3 once each", woken)
	}
	if !n.take(a3) || n.take(a2) {
		t.Fatal("after the holder left, the first waiter to run did not take the slot alone")
	}
	n.give(b1)
	if len(n.wake) != 0 {
		t.Fatal("giving back a slot nobody waited for woke someone")
	}
}
