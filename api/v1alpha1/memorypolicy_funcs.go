package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetCondition sets a condition of the policy, stamped with its generation.
func (p *MemoryPolicy) SetCondition(condType string, ok bool, reason, message string) {
	setCondition(&p.Status.Conditions, p.Generation, condType, boolStatus(ok), reason, message)
}

// GetCondition returns the condition of that type, or nil.
func (p *MemoryPolicy) GetCondition(condType string) *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, condType)
}

// IsValid reports whether the Valid condition is True for the current generation.
func (p *MemoryPolicy) IsValid() bool {
	c := p.GetCondition(ConditionValid)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation
}
