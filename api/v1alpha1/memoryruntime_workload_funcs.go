package v1alpha1

// PodDisruptionBudgetWanted reports whether the runtime wants its
// PodDisruptionBudget: more than one replica, and
// spec.service.podDisruptionBudget.enabled not false.
func (r *MemoryRuntime) PodDisruptionBudgetWanted() bool {
	pdb := r.Spec.Service.PodDisruptionBudget
	enabled := pdb == nil || pdb.Enabled == nil || *pdb.Enabled
	return enabled && r.Replicas() > 1
}

// TLSSecretName is the Secret of spec.service.tls, empty without TLS.
func (r *MemoryRuntime) TLSSecretName() string {
	if r.Spec.Service.TLS == nil {
		return ""
	}
	return r.Spec.Service.TLS.SecretName
}
