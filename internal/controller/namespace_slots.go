package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// namespaceBusyRetry is how soon a MemoryRuntime whose namespace already
// holds a reconcile worker is looked at again if no wake-up comes first
// (a wake-up is dropped only when its buffer is full). The waiting
// reconcile returns at once: it reads the cache and writes nothing.
const namespaceBusyRetry = 2 * time.Second

// wakeBuffer is how many wake-ups may wait to be queued.
const wakeBuffer = 1024

// namespaceSlots lets at most one reconcile of each namespace run at a
// time. A tenant's connectionSecretRef may name a server the tenant runs,
// which can log the operator in and then never answer: each such pass
// holds a worker until its deadline (--tenant-server-timeout). Without
// this, a namespace with as many such runtimes as there are workers
// (--max-concurrent-reconciles-runtime) stopped the provisioning and
// migration of every other tenant (issue 26's sixth review, HIGH 2); with
// it, one namespace holds one worker and the others stay free.
//
// A reconcile that finds its namespace busy does not wait (that would hold
// the worker all the same): it returns, is remembered as a waiter, and one
// waiter, the one that has waited longest, is queued again when the holder
// gives the slot back (through wake, a source of the controller), each
// after namespaceBusyRetry at the latest. The longest, not any: with ten
// runtimes of one namespace created together, a waiter picked at random
// (map order) could lose every draw, and one of them waited over a minute
// without a single pass while the others took the slot in turn
// (TestOperator/Databases under load).
// controller-runtime's queue keeps one entry per runtime and brings it
// forward on any event, so nothing is lost; the holder gives the slot
// back when its reconcile returns, however it returns.
type namespaceSlots struct {
	mu   sync.Mutex
	held map[string]types.NamespacedName
	// waiting holds each waiter's turn: the order in which it began to
	// wait (from next).
	waiting map[string]map[types.NamespacedName]uint64
	next    uint64
	wake    chan event.TypedGenericEvent[types.NamespacedName]
}

func newNamespaceSlots() *namespaceSlots {
	return &namespaceSlots{
		held:    map[string]types.NamespacedName{},
		waiting: map[string]map[types.NamespacedName]uint64{},
		wake:    make(chan event.TypedGenericEvent[types.NamespacedName], wakeBuffer),
	}
}

// take claims key's namespace for key; false, with key remembered as a
// waiter, when another runtime of the namespace holds it.
// controller-runtime never runs two reconciles of one key at once, so a
// holder never meets itself.
func (n *namespaceSlots) take(key types.NamespacedName) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, busy := n.held[key.Namespace]; busy {
		if n.waiting[key.Namespace] == nil {
			n.waiting[key.Namespace] = map[types.NamespacedName]uint64{}
		}
		if _, already := n.waiting[key.Namespace][key]; !already {
			n.next++
			n.waiting[key.Namespace][key] = n.next // keeps its turn when it asks again
		}
		return false
	}
	n.held[key.Namespace] = key
	delete(n.waiting[key.Namespace], key) // it waits no more
	return true
}

// give releases the slot key took and queues the namespace's waiter that
// has waited longest, the one to take the slot next; the others stay
// waiters, each queued by a later give in its turn (or after
// namespaceBusyRetry). Queuing them all
// let one namespace with more waiters than wakeBuffer fill the channel
// every namespace shares, and another namespace's wake-up was dropped at
// that moment (issue 26's seventh review, L1): now a give queues at most
// one, and the channel fills only if more than wakeBuffer namespaces give
// their slots back before the controller reads it.
func (n *namespaceSlots) give(key types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.held[key.Namespace] != key {
		return
	}
	delete(n.held, key.Namespace)
	var first types.NamespacedName
	turn := uint64(0)
	for w, t := range n.waiting[key.Namespace] {
		if turn == 0 || t < turn {
			first, turn = w, t
		}
	}
	if turn != 0 {
		select {
		case n.wake <- event.TypedGenericEvent[types.NamespacedName]{Object: first}:
			delete(n.waiting[key.Namespace], first)
		default: // full: namespaceBusyRetry brings it back
		}
	}
	if len(n.waiting[key.Namespace]) == 0 {
		delete(n.waiting, key.Namespace)
	}
}

// source queues the runtimes give wakes.
func (n *namespaceSlots) source() source.Source {
	return source.Channel(n.wake, handler.TypedEnqueueRequestsFromMapFunc(
		func(_ context.Context, key types.NamespacedName) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: key}}
		}))
}
