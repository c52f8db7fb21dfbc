package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets one condition stamped with the object's generation. The
// transition time only moves when the status flips (meta.SetStatusCondition),
// so setting the same condition again leaves the status equal and the
// reconciler writes nothing.
func setCondition(conds *[]metav1.Condition, generation int64, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               condType,
		Status:             status,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            message,
	})
}

// boolStatus turns a bool into a condition status.
func boolStatus(ok bool) metav1.ConditionStatus {
	if ok {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// KeyOr returns the selector's key, or def when the key is not set.
func (s *SecretKeySelector) KeyOr(def string) string {
	if s == nil || s.Key == "" {
		return def
	}
	return s.Key
}
