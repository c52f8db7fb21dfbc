package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkPolicyEnabled reports whether the runtime wants its NetworkPolicy:
// true unless spec.service.networkPolicy.enabled is false.
func (r *MemoryRuntime) NetworkPolicyEnabled() bool {
	np := r.Spec.Service.NetworkPolicy
	return np == nil || np.Enabled == nil || *np.Enabled
}

// NetworkPolicyPeers are the peers admitted to the service port:
// spec.service.networkPolicy.from, or by default every pod of the runtime's
// namespace.
func (r *MemoryRuntime) NetworkPolicyPeers() []networkingv1.NetworkPolicyPeer {
	if np := r.Spec.Service.NetworkPolicy; np != nil && len(np.From) > 0 {
		out := make([]networkingv1.NetworkPolicyPeer, len(np.From))
		for i := range np.From {
			np.From[i].DeepCopyInto(&out[i])
		}
		return out
	}
	return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
}
