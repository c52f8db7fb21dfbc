package controller

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
)

// The status of a MemoryRuntime is computed once per reconcile, at the end
// (Cluster API's pattern): the phases only record what they observed in
// runtimeFacts, deriveRuntimeStatus turns the facts into conditions, and the
// deferred patchStatus writes the difference, if any. No phase sets a
// condition itself, so the rules that relate Ready, Reconciling and Stalled
// live in this one file.

// runtimeFacts is what the phases of one reconcile observed.
type runtimeFacts struct {
	// untouched: the reconcile looked at nothing (a deleted runtime without
	// Engram's finalizer); the status stays as it is.
	untouched bool
	paused    bool
	// deleting is set while the finalizer runs (the reclaim policy).
	deleting bool
	// blocked is why the reconcile stopped before the end: a condition
	// (DatabaseReady or Ready) is False for that reason.
	blocked *blocker
	// provisioned is the DatabaseReady=True message when the tenant was
	// provisioned or verified in this reconcile (nil: not looked at, the
	// condition stays as it was).
	provisioned string
	// deploy is the live Deployment, once the Deployment phase applied it.
	deploy *appsv1.Deployment
	// endpoint is status.endpoint, for Ready's message.
	endpoint string
	// podTrouble is why a service Pod does not serve (OOMKilled,
	// CrashLoopBackOff...), from the Pods of a Deployment not rolled out.
	podTrouble string
	// err is the error a phase returned (retried with backoff).
	err error
	// moving is the Moving condition (a move to another server), nil
	// when no phase looked at one.
	moving *movingCondition
}

// blocker is one reason a reconcile could not go on.
type blocker struct {
	cond    string // the condition it makes False (besides Ready)
	reason  string
	message string
}

// block records that the reconcile stops (or stopped) for reason. The first
// blocker wins: it is what the user has to fix first.
func (f *runtimeFacts) block(cond, reason, message string) {
	if f.blocked == nil {
		f.blocked = &blocker{cond: cond, reason: reason, message: message}
	}
}

// stalledReasons are the reasons retrying cannot fix: the spec, the
// database or a foreign object has to change. They make Stalled True (kstatus
// Failed); every other failure makes Reconciling True (InProgress).
var stalledReasons = map[string]bool{
	memoryv1alpha1.ReasonSchemaNotManaged:   true,
	memoryv1alpha1.ReasonSchemaOwnedByOther: true,
	memoryv1alpha1.ReasonDimensionsMismatch: true,
	memoryv1alpha1.ReasonCitusUnsupported:   true,
	memoryv1alpha1.ReasonConnectionInvalid:  true,
	memoryv1alpha1.ReasonPolicyInvalid:      true,
	memoryv1alpha1.ReasonConfigInvalid:      true,
	memoryv1alpha1.ReasonTLSSecretInvalid:   true,
	memoryv1alpha1.ReasonImageNotSet:        true,
	memoryv1alpha1.ReasonObjectNotOwned:     true,
	memoryv1alpha1.ReasonInvalidSchedule:    true,
	memoryv1alpha1.ReasonInvalid:            true,
	// Placement on MemoryDatabases: no database can take the tenant (none
	// matches, none admits the namespace, or all are cordoned or full), the one it lives on is gone,
	// or the spec names another home than the one it has.
	memoryv1alpha1.ReasonNoDatabaseAvailable: true,
	memoryv1alpha1.ReasonNamespaceNotAllowed: true,
	memoryv1alpha1.ReasonDatabaseNotFound:    true,
	memoryv1alpha1.ReasonDatabaseChanged:     true,
	memoryv1alpha1.ReasonMoveSourceUnknown:   true,
	// A model change on a Citus tenant with vectors waits for
	// spec.embedding to be set back (no re-embedding on Citus yet).
	memoryv1alpha1.ReasonEmbeddingChangeNeedsReembed: true,
}

// isStalled reports whether reason needs a human (see stalledReasons).
func isStalled(reason string) bool { return stalledReasons[reason] }

// deriveRuntimeStatus sets the conditions and status.observedGeneration of
// rt from the facts of one reconcile. It is a pure function of its inputs
// (table-tested in runtime_status_test.go); conditions no phase observed
// keep their value.
func deriveRuntimeStatus(rt *memoryv1alpha1.MemoryRuntime, f runtimeFacts) {
	if f.untouched {
		return
	}
	if f.paused {
		rt.SetCondition(memoryv1alpha1.ConditionPaused, true, memoryv1alpha1.ReasonPaused,
			"spec.paused is true: the operator leaves this runtime's objects and database as they are")
		setProgress(rt, "", "")
		rt.MarkObserved()
		return
	}
	if f.deleting {
		rt.SetCondition(memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonDeleting,
			fmt.Sprintf("deleting; reclaimPolicy %s", rt.ReclaimPolicyOrDefault()))
		if b := f.blocked; b != nil && b.cond == memoryv1alpha1.ConditionDatabaseReady {
			rt.SetCondition(b.cond, false, b.reason, b.message)
		}
		if f.err == nil {
			rt.MarkObserved()
		}
		return
	}
	rt.SetCondition(memoryv1alpha1.ConditionPaused, false, memoryv1alpha1.ReasonNotPaused, "reconciling")
	if m := f.moving; m != nil {
		rt.SetCondition(memoryv1alpha1.ConditionMoving, m.status, m.reason, m.message)
	}

	b := f.blocked
	switch {
	case b != nil && b.cond == memoryv1alpha1.ConditionDatabaseReady:
		rt.SetCondition(b.cond, false, b.reason, b.message)
	case f.provisioned != "":
		rt.SetCondition(memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned, f.provisioned)
	}

	var roll rollout
	if f.deploy != nil {
		roll = rolloutProgress(rt, f.deploy)
		if f.podTrouble != "" {
			roll.message += "; " + f.podTrouble
		}
		rt.SetCondition(memoryv1alpha1.ConditionServiceAvailable, roll.available, roll.reason, roll.message)
	}

	switch {
	case b != nil:
		rt.SetCondition(memoryv1alpha1.ConditionReady, false, b.reason, b.message)
	case f.err != nil:
		// An API or database request failed: Ready keeps what it said (the
		// service may well still serve); Reconciling says why it is not done.
	case f.deploy == nil:
		// No phase got as far as the Deployment: nothing to say about Ready.
	case roll.available:
		rt.SetCondition(memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable, "memory service available at "+f.endpoint)
	default:
		rt.SetCondition(memoryv1alpha1.ConditionReady, false, roll.reason, roll.message)
	}

	switch {
	case b != nil:
		setProgress(rt, b.reason, b.message)
	case f.err != nil:
		setProgress(rt, memoryv1alpha1.ReasonReconcileError, oneLine(f.err))
	case roll.rolling:
		setProgress(rt, roll.progressReason, roll.message)
	default:
		setProgress(rt, "", "")
	}
	// A reconcile that ended in an error did not act on the whole
	// generation: it is retried, and observedGeneration stays behind.
	if f.err == nil {
		rt.MarkObserved()
	}
}

// rollout is where the memory service's Deployment stands.
type rollout struct {
	available bool   // at least one replica serves (ServiceAvailable)
	reason    string // ServiceAvailable's reason
	message   string
	// rolling: the Deployment has not rolled the current template out to
	// every replica yet (Reconciling=True with progressReason).
	rolling        bool
	progressReason string
}

// rolloutProgress derives the service's availability (ServiceAvailability)
// and whether the current pod template is rolled out to every wanted
// replica, from the Deployment (nil: not there yet).
func rolloutProgress(rt *memoryv1alpha1.MemoryRuntime, d *appsv1.Deployment) rollout {
	r := rollout{}
	r.available, r.reason, r.message = specs.ServiceAvailability(rt, d)
	if !rolledOut(rt.Replicas(), d) {
		r.rolling, r.progressReason = true, memoryv1alpha1.ReasonRollingOut
		if !r.available {
			r.progressReason = memoryv1alpha1.ReasonDeploying
		}
	}
	return r
}

// rolledOut reports whether the Deployment controller has acted on the
// Deployment's current generation and every wanted replica runs the
// current template and is available, with no old replica left.
func rolledOut(want int32, d *appsv1.Deployment) bool {
	if d == nil {
		return false
	}
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas >= want &&
		st.AvailableReplicas >= want && st.Replicas <= want
}
