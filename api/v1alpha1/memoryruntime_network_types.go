package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
)

// MemoryRuntimeNetworkPolicy configures the NetworkPolicy the operator keeps
// in front of a runtime's memory service. The policy selects the service's
// pods and admits TCP traffic to spec.service.port from the peers in from;
// every other ingress to those pods is denied (egress is not restricted).
// A NetworkPolicy only takes effect when the cluster's network plugin
// enforces NetworkPolicies (Calico, Cilium, ...).
//
// +kubebuilder:validation:XValidation:rule="!has(self.from) || self.from.all(p, has(p.podSelector) || has(p.namespaceSelector) || has(p.ipBlock))",message="each service.networkPolicy.from entry must set podSelector, namespaceSelector or ipBlock"
// +kubebuilder:validation:XValidation:rule="!has(self.from) || self.from.all(p, !has(p.ipBlock) || (!has(p.podSelector) && !has(p.namespaceSelector)))",message="a service.networkPolicy.from entry with ipBlock cannot also set podSelector or namespaceSelector (use two entries)"
// +kubebuilder:validation:XValidation:rule="!has(self.from) || self.from.all(p, !has(p.ipBlock) || isCIDR(p.ipBlock.cidr))",message="service.networkPolicy.from[].ipBlock.cidr must be a CIDR such as 10.0.0.0/8"
type MemoryRuntimeNetworkPolicy struct {
	// Enabled keeps the NetworkPolicy <runtime> in place (default true).
	// false deletes the one the operator created and leaves the service
	// open to every pod the cluster's network allows.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// From lists who may connect to the service port, with the peers of a
	// networking.k8s.io/v1 NetworkPolicy ingress rule: podSelector alone
	// selects pods of this runtime's namespace, namespaceSelector alone every
	// pod of the selected namespaces (select a namespace by name with the
	// label kubernetes.io/metadata.name), both together selected pods of
	// selected namespaces, ipBlock a CIDR (traffic from outside the cluster).
	// Absent: every pod of this runtime's namespace (podSelector: {}), and
	// nothing else. Listing peers replaces that default: add
	// {podSelector: {}} to keep the runtime's own namespace.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	From []networkingv1.NetworkPolicyPeer `json:"from,omitempty"`
}
