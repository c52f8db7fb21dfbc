package specs

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// NetworkPolicyName is the NetworkPolicy in front of a runtime's memory service.
func NetworkPolicyName(runtime string) string { return runtime }

// NetworkPolicy admits TCP traffic to a runtime's service port from the
// peers of spec.service.networkPolicy.from (by default every pod of the
// runtime's namespace), and to its metrics port from the namespaces
// metricsFrom selects (where Prometheus runs; --service-metrics-namespaces)
// only, so an API client cannot read the metrics. Because it selects the
// runtime's pods for Ingress, it denies every other ingress to them. It
// selects the maintenance job pods too (RuntimePodSelector): they listen on
// no port, so for them it only denies. Egress is left alone: the service
// and the jobs must reach PostgreSQL and the embedding and LLM endpoints,
// which the operator knows by host name at best, and a NetworkPolicy takes
// addresses.
//
// The ports are the pod's (NetworkPolicies act on pods, not on the
// Service), by number: named ports are not supported by every network plugin.
func NetworkPolicy(rt *memoryv1alpha1.MemoryRuntime, metricsFrom *metav1.LabelSelector) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(rt.ServicePort())
	metricsPort := intstr.FromInt32(rt.MetricsPort())
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: ownedMeta(rt, NetworkPolicyName(rt.Name), naming.ComponentService),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: RuntimePodSelector(rt),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}},
				From:  rt.NetworkPolicyPeers(),
			}, {
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &metricsPort}},
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: metricsFrom.DeepCopy()}},
			}},
		},
	}
}

// RuntimePodSelector selects every pod of a runtime: its memory service's,
// its maintenance jobs' and its re-embed Jobs'.
func RuntimePodSelector(rt *memoryv1alpha1.MemoryRuntime) metav1.LabelSelector {
	return metav1.LabelSelector{
		MatchLabels: map[string]string{naming.LabelName: naming.AppName, naming.LabelInstance: rt.Name},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key:      naming.LabelComponent,
			Operator: metav1.LabelSelectorOpIn,
			Values:   []string{naming.ComponentService, naming.ComponentJob, naming.ComponentReembed},
		}},
	}
}
