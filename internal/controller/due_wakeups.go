package controller

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// dueWakeups keeps a wakeup that must hold on a reconcile's error path.
// When Reconcile returns an error, controller-runtime ignores its Result
// (reconcileHandler in pkg/internal/controller: the key is re-added
// rate-limited, RequeueAfter dropped with a warning) and the key comes back
// after the controller's backoff, up to RetryMaxDelay (5 min by default).
// A source frozen by a move must have its writes back after
// --move-freeze-timeout whatever else fails (liftOverdueFreeze): a pass that
// fails while the freeze is not yet due notes when it is, and the rate
// limiter (limit) answers no later than that for that key. Only the freeze
// is noted: other "come back" wishes of a failing pass, some of a
// millisecond, would turn the backoff into a hot loop.
type dueWakeups struct {
	mu  sync.Mutex
	due map[reconcile.Request]time.Time
}

func newDueWakeups() *dueWakeups {
	return &dueWakeups{due: map[reconcile.Request]time.Time{}}
}

// note records, for a pass that ended with an error, that key must come
// back within in (in <= 0: nothing due, anything noted before is dropped).
// A nil dueWakeups (a reconciler built by a unit test) notes nothing.
func (w *dueWakeups) note(key reconcile.Request, in time.Duration) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if in <= 0 {
		delete(w.due, key)
		return
	}
	w.due[key] = time.Now().Add(in)
}

// take returns how long until key's noted wakeup and forgets it (ok false
// when none is noted).
func (w *dueWakeups) take(key reconcile.Request) (time.Duration, bool) {
	if w == nil {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.due[key]
	delete(w.due, key)
	return max(time.Until(at), 0), ok
}

// limit wraps the controller's rate limiter: a key with a noted wakeup is
// retried at the earlier of its backoff and that wakeup. The backoff still
// counts the failure (inner.When), so a pass that keeps failing after the
// wakeup backs off as before.
func (w *dueWakeups) limit(inner workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimiter[reconcile.Request] {
	return dueLimiter{inner: inner, wakeups: w}
}

type dueLimiter struct {
	inner   workqueue.TypedRateLimiter[reconcile.Request]
	wakeups *dueWakeups
}

func (l dueLimiter) When(key reconcile.Request) time.Duration {
	backoff := l.inner.When(key)
	if due, ok := l.wakeups.take(key); ok && due < backoff {
		return due
	}
	return backoff
}

func (l dueLimiter) Forget(key reconcile.Request) { l.inner.Forget(key) }

func (l dueLimiter) NumRequeues(key reconcile.Request) int { return l.inner.NumRequeues(key) }

// freezeDueIn is how long until the freeze of rt's move is overdue
// (--move-freeze-timeout), or 0 when its writes are not frozen or the
// freeze is already due (liftOverdueFreeze lifts it then).
func freezeDueIn(rt *memoryv1alpha1.MemoryRuntime, timeout time.Duration) time.Duration {
	mv := rt.Status.ServerMove
	if mv == nil || mv.Phase != memoryv1alpha1.ServerMoveFrozen || mv.FreezeStartedAt == nil {
		return 0
	}
	return max(timeout-time.Since(mv.FreezeStartedAt.Time), 0)
}
