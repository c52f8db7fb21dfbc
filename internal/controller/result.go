package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Named results, so every return of a Reconcile says what happens next.
// (Returning a non-nil error instead makes controller-runtime log it and
// retry the key with the controller's exponential backoff; the Result is
// ignored then. That is how transient failures such as a database that is
// down are retried: see rateLimiter in setup.go for the bounds; a move's
// frozen source caps that backoff at its freeze timeout, due_wakeups.go.)

// doneResult: the object is as declared. controller-runtime forgets the key
// until a watched object changes (or the informers' periodic resync).
func doneResult() reconcile.Result { return reconcile.Result{} }

// requeueAfter: nothing is wrong, but something time-based is due, such as
// the periodic grant check or the next scheduled run. controller-runtime adds
// the key back after d and resets its backoff for the key.
func requeueAfter(d time.Duration) reconcile.Result {
	if d <= 0 {
		d = time.Second
	}
	return reconcile.Result{RequeueAfter: d}
}

// requeueTimer collects the "come back after" wishes of several phases and
// keeps the earliest.
type requeueTimer struct{ after time.Duration }

// at asks to come back after d (ignored when d <= 0).
func (t *requeueTimer) at(d time.Duration) {
	if d > 0 && (t.after == 0 || d < t.after) {
		t.after = d
	}
}

// result is doneResult or requeueAfter(the earliest wish).
func (t *requeueTimer) result() reconcile.Result {
	if t.after == 0 {
		return doneResult()
	}
	return requeueAfter(t.after)
}
