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
// waiter is queued again when the holder gives the slot back (through
// wake, a source of the controller), each after namespaceBusyRetry at the
// latest.
// controller-runtime's queue keeps one entry per runtime and brings it
// forward on any event, so nothing is lost; the holder gives the slot
// back when its reconcile returns, however it returns.
type namespaceSlots struct {
	mu      sync.Mutex
	held    map[string]types.NamespacedName
	waiting map[string]map[types.NamespacedName]struct{}
	wake    chan event.TypedGenericEvent[types.NamespacedName]
}

func newNamespaceSlots() *namespaceSlots {
	return &namespaceSlots{
		held:    map[string]types.NamespacedName{},
		waiting: map[string]map[types.NamespacedName]struct{}{},
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
			n.waiting[key.Namespace] = map[types.NamespacedName]struct{}{}
		}
		n.waiting[key.Namespace][key] = struct{}{}
		return false
	}
	n.held[key.Namespace] = key
	delete(n.waiting[key.Namespace], key) // it waits no more
	return true
}

// give releases the slot key took and queues one of the namespace's
// waiters, the one to take the slot next; the others stay waiters, each
// queued by a later give (or after namespaceBusyRetry). Queuing them all
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
	for w := range n.waiting[key.Namespace] {
		select {
		case n.wake <- event.TypedGenericEvent[types.NamespacedName]{Object: w}:
			delete(n.waiting[key.Namespace], w)
		default: // full: namespaceBusyRetry brings it back
		}
		break
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
