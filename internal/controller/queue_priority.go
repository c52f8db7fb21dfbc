package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// The MemoryRuntime controller's queue is controller-runtime's priority
// queue (on by default since v0.22): ready keys leave it by priority, then
// in the order they were added, and a key added again keeps its place
// unless it comes with a higher priority.
//
// A new runtime needs two reconciles to become Ready: the first provisions
// the tenant and applies the Deployment; the second runs when the
// Deployment reports an available replica. The first one's own writes (the
// Secrets, ConfigMap, Deployment... it creates) queue the runtime again at
// once, behind every runtime created before that moment. With 1,000
// runtimes created together, every second reconcile waited for every
// other runtime's first: Ready stayed at 8 of 1,000 for 100 s, then jumped
// to 1,000 (docs/performance.md, "Operator: why Ready came in one jump").
//
// So a reconcile that leaves its runtime waiting only for its first
// replica gives it priorityFinishing: its next reconcile goes ahead of the
// runtimes not begun yet, and a runtime begun finishes before new ones
// start. Every other reconcile sets priorityNormal, so a runtime once
// Ready goes back to its place (the priority of a key sticks to it
// through RequeueAfter otherwise).
const (
	priorityNormal    = 0
	priorityFinishing = 10
)

// queuePriority is the priority of the runtime's next reconcile, from the
// facts of this one: priorityFinishing while its Deployment has no available
// replica yet and nothing else is wrong (no error, no blocker, no Pod
// reporting trouble — a Pod in CrashLoopBackOff waits for a human, and must
// not go ahead of new runtimes every podCheckInterval).
func queuePriority(rt *memoryv1alpha1.MemoryRuntime, f runtimeFacts) int {
	if f.err != nil || f.blocked != nil || f.deleting || f.paused || f.deploy == nil || f.podTrouble != "" {
		return priorityNormal
	}
	if roll := rolloutProgress(rt, f.deploy); roll.available || !roll.rolling {
		return priorityNormal
	}
	// Only while it is new: a runtime whose first replica does not come
	// (a Pod pending for good, an envtest cluster without kubelet) is
	// reconciled every podCheckInterval, and at priorityFinishing for
	// ever it went ahead of every new runtime: with a few of them and
	// slow reconciles, a new one waited without end.
	if created := f.deploy.CreationTimestamp; !created.IsZero() && time.Since(created.Time) > finishingWindow {
		return priorityNormal
	}
	return priorityFinishing
}

// finishingWindow is how long after its Deployment was created a runtime
// keeps priorityFinishing: far more than a replica takes to become
// available, far less than what a starved new runtime could wait.
const finishingWindow = time.Minute

// withPriority sets the priority of the key's next reconcile on res.
func withPriority(res reconcile.Result, p int) reconcile.Result {
	res.Priority = &p
	return res
}
