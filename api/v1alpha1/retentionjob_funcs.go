package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CanonicalOperations is the order in which a run performs its operations:
// decay first (it may forget rows), then expire, then purge (which removes
// what the first two deactivated, once retention allows), then compact;
// then the conversation operations: summarize, then sessions; export last,
// so it holds what the others left. It equals memory.RunOperations.
var CanonicalOperations = []Operation{OperationDecay, OperationExpire, OperationPurge, OperationCompact,
	OperationSummarize, OperationSessions, OperationExport}

// SetCondition sets a condition of the retention job, stamped with its generation.
func (j *RetentionJob) SetCondition(condType string, ok bool, reason, message string) {
	setCondition(&j.Status.Conditions, j.Generation, condType, boolStatus(ok), reason, message)
}

// GetCondition returns the condition of that type, or nil.
func (j *RetentionJob) GetCondition(condType string) *metav1.Condition {
	return meta.FindStatusCondition(j.Status.Conditions, condType)
}

// SortedOperations returns spec.operations in canonical order, without repeats.
func (j *RetentionJob) SortedOperations() []Operation {
	out := make([]Operation, 0, len(j.Spec.Operations))
	for _, op := range CanonicalOperations {
		if slices.Contains(j.Spec.Operations, op) {
			out = append(out, op)
		}
	}
	return out
}

// ConcurrencyPolicyOrDefault is spec.concurrencyPolicy or its default (Forbid).
func (j *RetentionJob) ConcurrencyPolicyOrDefault() ConcurrencyPolicy {
	if j.Spec.ConcurrencyPolicy == "" {
		return ConcurrencyForbid
	}
	return j.Spec.ConcurrencyPolicy
}
