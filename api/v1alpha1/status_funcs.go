package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reconciling and Stalled are "abnormal-true" conditions (the kstatus
// convention): present with status True while they hold, removed when they
// no longer do. These helpers keep that rule in one place for all kinds.

// setProgress sets Reconciling or Stalled to True (reason non-empty) or
// removes it (reason empty).
func setProgress(conds *[]metav1.Condition, generation int64, condType, reason, message string) {
	if reason == "" {
		meta.RemoveStatusCondition(conds, condType)
		return
	}
	setCondition(conds, generation, condType, metav1.ConditionTrue, reason, message)
}

// SetReconciling marks the runtime as still acting on its generation
// (reason non-empty) or done with it (reason empty: the condition goes).
func (r *MemoryRuntime) SetReconciling(reason, message string) {
	setProgress(&r.Status.Conditions, r.Generation, ConditionReconciling, reason, message)
}

// SetStalled marks the runtime as stuck until a human acts (reason
// non-empty), or clears it (reason empty).
func (r *MemoryRuntime) SetStalled(reason, message string) {
	setProgress(&r.Status.Conditions, r.Generation, ConditionStalled, reason, message)
}

// MarkObserved records that the current generation was fully acted on.
func (r *MemoryRuntime) MarkObserved() { r.Status.ObservedGeneration = r.Generation }

// SetReconciling: see MemoryRuntime.SetReconciling.
func (j *RetentionJob) SetReconciling(reason, message string) {
	setProgress(&j.Status.Conditions, j.Generation, ConditionReconciling, reason, message)
}

// SetStalled: see MemoryRuntime.SetStalled.
func (j *RetentionJob) SetStalled(reason, message string) {
	setProgress(&j.Status.Conditions, j.Generation, ConditionStalled, reason, message)
}

// MarkObserved records that the current generation was fully acted on.
func (j *RetentionJob) MarkObserved() { j.Status.ObservedGeneration = j.Generation }

// SetStalled: see MemoryRuntime.SetStalled (a policy that fails its checks).
func (p *MemoryPolicy) SetStalled(reason, message string) {
	setProgress(&p.Status.Conditions, p.Generation, ConditionStalled, reason, message)
}

// MarkObserved records that the current generation was fully acted on.
func (p *MemoryPolicy) MarkObserved() { p.Status.ObservedGeneration = p.Generation }

// IsPaused reports whether the Paused condition is True.
func (r *MemoryRuntime) IsPaused() bool {
	return meta.IsStatusConditionTrue(r.Status.Conditions, ConditionPaused)
}
