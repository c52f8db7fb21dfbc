package specs

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// PodDisruptionBudget keeps all but one replica of a runtime's memory
// service through voluntary disruptions: a node drain evicts one pod, then
// waits until its replacement is ready before the next. maxUnavailable
// rather than minAvailable, so it follows the replicas as they change (a
// fixed minAvailable would either block every drain at its own count or
// allow more than one pod down at higher counts). Pods that are not ready
// may always be evicted: they serve nothing, and a rollout stuck on a bad
// image must never block a node drain.
func PodDisruptionBudget(rt *memoryv1alpha1.MemoryRuntime) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: ownedMeta(rt, naming.PodDisruptionBudgetName(rt.Name), naming.ComponentService),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &maxUnavailable,
			Selector:                   &metav1.LabelSelector{MatchLabels: naming.SelectorLabels(rt.Name)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}
