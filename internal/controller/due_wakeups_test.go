package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// frozenRuntime is a paused runtime whose move froze its source frozenFor ago.
func frozenRuntime(frozenFor time.Duration) *memoryv1alpha1.MemoryRuntime {
	return &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bot", UID: "u1"},
		Spec:       memoryv1alpha1.MemoryRuntimeSpec{Paused: true},
		Status: memoryv1alpha1.MemoryRuntimeStatus{ServerMove: &memoryv1alpha1.ServerMoveStatus{
			Phase:           memoryv1alpha1.ServerMoveFrozen,
			FreezeStartedAt: &metav1.Time{Time: time.Now().Add(-frozenFor)},
		}},
	}
}

// TestFailingPassKeepsFreezeDue (review 16, LOW): a pass that fails while a
// move holds the source frozen comes back when the freeze is due, not after
// the controller's backoff. The pass is a paused runtime's (its freeze is
// due in about 59 minutes) whose status write the API server refuses:
// Reconcile returns the error, with no RequeueAfter (controller-runtime
// would drop it), and the key's next retry is at the freeze's due time
// although the backoff says 2 hours (durations far apart: the test does
// not depend on how fast the machine runs it).
func TestFailingPassKeepsFreezeDue(t *testing.T) {
	rt := frozenRuntime(time.Minute)
	refused := errors.New("the API server is unavailable")
	c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(rt).WithStatusSubresource(rt).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return refused
		}}).Build()
	opts := Options{MoveFreezeTimeout: time.Hour, RetryBaseDelay: 2 * time.Hour, RetryMaxDelay: 2 * time.Hour}
	r := &MemoryRuntimeReconciler{client: c, reader: c, opts: opts, memory: newRuntimeMemory(), slots: newNamespaceSlots(), wakeups: newDueWakeups()}
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "bot"}}
	res, err := r.Reconcile(context.Background(), key)
	if !errors.Is(err, refused) {
		t.Fatalf("Reconcile returned %v, want the refused status write", err)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("Reconcile returned RequeueAfter %s with an error: controller-runtime ignores it (and logs a warning)", res.RequeueAfter)
	}
	limiter := r.wakeups.limit(rateLimiter(opts))
	if d := limiter.When(key); d <= 0 || d > 59*time.Minute {
		t.Errorf("the failing pass is retried after %s, want the freeze's due time (within 59 min), not the 2 h backoff", d)
	}
	// Noted once: the next failure backs off as before.
	if d := limiter.When(key); d != 2*time.Hour {
		t.Errorf("the failure after the due time is retried after %s, want the backoff (2h0m0s)", d)
	}
}

// TestFreezeDueOnlyWhileFrozen: nothing is noted for a freeze already due
// (the watchdog lifts it in that pass; a failure then backs off) nor for a
// move that is not frozen.
func TestFreezeDueOnlyWhileFrozen(t *testing.T) {
	if d := freezeDueIn(frozenRuntime(20*time.Second), 15*time.Second); d != 0 {
		t.Errorf("a freeze overdue by 5 s is due in %s, want 0", d)
	}
	catching := frozenRuntime(time.Second)
	catching.Status.ServerMove.Phase = memoryv1alpha1.ServerMoveCatchingUp
	if d := freezeDueIn(catching, 15*time.Second); d != 0 {
		t.Errorf("a move catching up is due in %s, want 0", d)
	}
	if d := freezeDueIn(&memoryv1alpha1.MemoryRuntime{}, 15*time.Second); d != 0 {
		t.Errorf("a runtime without a move is due in %s, want 0", d)
	}
	w := newDueWakeups()
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "bot"}}
	w.note(key, time.Second)
	w.note(key, 0) // a later failing pass with nothing due
	if _, ok := w.take(key); ok {
		t.Error("a wakeup noted by an earlier pass outlived a later pass with nothing due")
	}
}

// TestFreezeDueInControllerRuntimeQueue: controller-runtime's own queue (the
// priority queue every controller here uses) re-adds a failed key after
// limit's answer: the key noted due in 50 ms is handed out again long before
// its 10-minute backoff.
func TestFreezeDueInControllerRuntimeQueue(t *testing.T) {
	w := newDueWakeups()
	inner := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](10*time.Minute, 10*time.Minute)
	q := priorityqueue.New("due-test", func(o *priorityqueue.Opts[reconcile.Request]) { o.RateLimiter = w.limit(inner) })
	defer q.ShutDown()
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "bot"}}
	w.note(key, 50*time.Millisecond)
	// What reconcileHandler does when Reconcile returns an error.
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, key)
	got := make(chan reconcile.Request, 1)
	go func() {
		item, _, _ := q.GetWithPriority()
		got <- item
	}()
	select {
	case item := <-got:
		if item != key {
			t.Fatalf("the queue handed out %v, want %v", item, key)
		}
	case <-time.After(time.Minute):
		t.Fatal("the failed key was not handed out again within a minute: the freeze's due time did not hold over the 10-minute backoff")
	}
	if n := inner.NumRequeues(key); n != 1 {
		t.Errorf("the backoff counted %d failures, want 1 (the cap does not reset it)", n)
	}
}
