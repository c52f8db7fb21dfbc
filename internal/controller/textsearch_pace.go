package controller

import (
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// DefaultTextSearchMinInterval is how long after one switch of a tenant's
// text search configuration the next may start. A switch parses every
// memory, message, summary and episode of the tenant and builds an index:
// a policy that flips its configuration back and forth would otherwise
// keep the database server busy for every tenant on it.
const DefaultTextSearchMinInterval = 5 * time.Minute

// textPace is what this process knows of a tenant's text search: the
// configuration its last successful provisioning pass applied, when that
// pass switched to it (zero: no switch seen since this process started),
// and the configuration a deferral was last announced for.
type textPace struct {
	applied   string
	switched  time.Time
	announced string
}

// decideTextSearch is the configuration a provisioning pass applies when
// the policy wants want, and how long the policy's waits (0: it does not).
// The first pass of this process, a policy that keeps the configuration
// ("" or the one applied) and a switch the interval allows apply want; a
// switch within the interval after the previous one keeps the applied
// configuration until the interval has passed. An operator restart forgets
// the last switch: one more switch at the most per restart.
func decideTextSearch(want string, pace textPace, now time.Time, minInterval time.Duration) (string, time.Duration) {
	if want == "" || pace.applied == "" || want == pace.applied || pace.switched.IsZero() {
		return want, 0
	}
	if since := now.Sub(pace.switched); since < minInterval {
		return pace.applied, minInterval - since
	}
	return want, 0
}

// attempted is pace when a pass starts with config: a pass that sets out
// to switch the tenant to another configuration than the one applied counts
// as a switch from its start, whatever its end (a pass that switches and
// then fails in the refill or the drop would otherwise leave the next flip
// unpaced; one that fails before switching delays the next flip at most
// one interval).
func (pace textPace) attempted(config string, now time.Time) textPace {
	if config == "" || pace.applied == "" || config == pace.applied {
		return pace
	}
	pace.applied, pace.switched = config, now
	return pace
}

// paced is pace after a successful pass that applied config, switched
// saying whether the pass switched the tenant to it.
func (pace textPace) paced(config string, switched bool, now time.Time) textPace {
	if config == "" {
		return pace
	}
	if switched {
		pace.switched = now
	}
	pace.applied = config
	if pace.announced == config {
		pace.announced = ""
	}
	return pace
}

// paceTextSearch is the text search configuration this pass applies when
// the policy wants want (decideTextSearch). A deferred one is announced
// once, in a Normal event, and the runtime is requeued when its wait ends.
func (r *MemoryRuntimeReconciler) paceTextSearch(s *runtimeScope, mem runtimeState, want string) string {
	use, wait := decideTextSearch(want, mem.text, time.Now(), r.opts.TextSearchMinInterval)
	if wait <= 0 {
		return use
	}
	s.requeue.at(wait)
	if mem.text.announced != want {
		r.eventer().normal(s.rt, memoryv1alpha1.ReasonTextSearchDeferred, "Provision",
			"text search configuration %s starts in %s: the tenant switched to %s less than %s ago, and each switch parses every row of the tenant and builds an index",
			want, wait.Round(time.Second), use, r.opts.TextSearchMinInterval)
		r.memory.update(s.rt.UID, func(st *runtimeState) { st.text.announced = want })
	}
	return use
}
