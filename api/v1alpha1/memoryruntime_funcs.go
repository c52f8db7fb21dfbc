package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of a MemoryRuntime, the same as the CRD's; the helpers below fall
// back to them for objects that did not pass through the API server (tests,
// the builders' unit tests).
const (
	DefaultServicePort         int32 = 8080
	DefaultEmbeddingDimensions int32 = 384
	// DefaultConnectionKey is the key of a connection Secret holding a URI.
	DefaultConnectionKey = "uri"
	// DefaultAPIKeyKey is the key of an API key Secret.
	DefaultAPIKeyKey = "apiKey"
)

// SetCondition sets a condition of the runtime, stamped with its generation.
func (r *MemoryRuntime) SetCondition(condType string, ok bool, reason, message string) {
	setCondition(&r.Status.Conditions, r.Generation, condType, boolStatus(ok), reason, message)
}

// GetCondition returns the condition of that type, or nil.
func (r *MemoryRuntime) GetCondition(condType string) *metav1.Condition {
	return meta.FindStatusCondition(r.Status.Conditions, condType)
}

// ServicePort is spec.service.port or its default.
func (r *MemoryRuntime) ServicePort() int32 {
	if r.Spec.Service.Port == 0 {
		return DefaultServicePort
	}
	return r.Spec.Service.Port
}

// Replicas is spec.service.replicas or its default (1).
func (r *MemoryRuntime) Replicas() int32 {
	if r.Spec.Service.Replicas == nil {
		return 1
	}
	return *r.Spec.Service.Replicas
}

// EmbeddingProvider is spec.embedding.provider or its default (builtin).
func (r *MemoryRuntime) EmbeddingProvider() EmbeddingProvider {
	if r.Spec.Embedding.Provider == "" {
		return EmbeddingBuiltin
	}
	return r.Spec.Embedding.Provider
}

// EmbeddingDimensions is spec.embedding.dimensions or its default (384).
func (r *MemoryRuntime) EmbeddingDimensions() int32 {
	if r.Spec.Embedding.Dimensions == 0 {
		return DefaultEmbeddingDimensions
	}
	return r.Spec.Embedding.Dimensions
}

// ReclaimPolicyOrDefault is spec.reclaimPolicy or its default (Retain).
func (r *MemoryRuntime) ReclaimPolicyOrDefault() ReclaimPolicy {
	if r.Spec.ReclaimPolicy == "" {
		return ReclaimRetain
	}
	return r.Spec.ReclaimPolicy
}

// PolicyName is the name of the referenced MemoryPolicy, empty for the built-in defaults.
func (r *MemoryRuntime) PolicyName() string {
	if r.Spec.PolicyRef == nil {
		return ""
	}
	return r.Spec.PolicyRef.Name
}
