package v1alpha1

// ServicePodDisruptionBudget configures the PodDisruptionBudget the
// operator keeps for a memory service of more than one replica:
// maxUnavailable 1 (a drain evicts one pod at a time and waits for its
// replacement to be ready), and pods that are not ready may always be
// evicted, so a broken rollout never blocks a node drain. With one replica
// (or none) there is no PodDisruptionBudget: it could only block drains.
type ServicePodDisruptionBudget struct {
	// Enabled keeps the PodDisruptionBudget <runtime> in place while
	// spec.service.replicas is more than 1 (default true). false deletes
	// the one the operator created: set it when your own policy engine
	// writes PodDisruptionBudgets (a pod under two budgets cannot be
	// evicted at all).
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
}

// ServiceTLS serves a memory service over HTTPS.
type ServiceTLS struct {
	// SecretName names a Secret of this runtime's namespace holding the
	// certificate (chain) in tls.crt and its private key in tls.key, PEM:
	// a kubernetes.io/tls Secret as cert-manager writes it. It is mounted
	// into the service pods, and a renewed certificate is picked up
	// without a restart. The certificate should name the Service
	// (<runtime>.<namespace>.svc) for clients to verify it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`
}
