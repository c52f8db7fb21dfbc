package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// apiKeyDigests reads the API key Secrets the runtime names: a missing one
// stops the reconcile (a pod could not start), and their digests go into the
// pod template hash (env vars are only read at start).
func (r *MemoryRuntimeReconciler) apiKeyDigests(ctx context.Context, s *runtimeScope) ([]string, bool, error) {
	rt := s.rt
	var refs []apiKeyRef
	if s.dual != nil {
		// A re-embed fills: the recorded embedder's key (the Deployment's)
		// and the spec's, the next one's.
		if ref := s.dual.current.APIKeySecretRef; ref != nil {
			refs = append(refs, apiKeyRef{"the recorded embedder's key (the service's ENGRAM_EMBEDDING_API_KEY)", ref})
		}
	}
	if ref := rt.Spec.Embedding.APIKeySecretRef; ref != nil {
		refs = append(refs, apiKeyRef{"spec.embedding.apiKeySecretRef", ref})
	}
	if rt.Spec.LLM != nil && rt.Spec.LLM.APIKeySecretRef != nil {
		refs = append(refs, apiKeyRef{"spec.llm.apiKeySecretRef", rt.Spec.LLM.APIKeySecretRef})
	}
	if s.rerankKey != nil {
		refs = append(refs, apiKeyRef{fmt.Sprintf("MemoryPolicy %q spec.reranking.apiKeySecretRef", s.policyName), s.rerankKey})
	}
	var digests []string
	for _, x := range refs {
		var sec corev1.Secret
		found, err := getOptional(ctx, r.secrets, client.ObjectKey{Namespace: rt.Namespace, Name: x.ref.Name}, &sec)
		if err != nil {
			return nil, false, fmt.Errorf("reading Secret %q: %w", x.ref.Name, err)
		}
		key := x.ref.KeyOr(memoryv1alpha1.DefaultAPIKeyKey)
		if !found || len(sec.Data[key]) == 0 {
			s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonSecretNotFound, fmt.Sprintf(
				"%s: Secret %q in namespace %q has no key %q%s", x.field, x.ref.Name, rt.Namespace, key, overBoundNote(&sec)))
			return nil, true, nil
		}
		digests = append(digests, naming.SHA256Hex(sec.Data[key]))
	}
	return digests, false, nil
}

// serviceKeyEnv is the service's environment of keys beyond tenantEnv's:
// the reranker's, and during a re-embed the next embedder's.
func (s *runtimeScope) serviceKeyEnv() []corev1.EnvVar {
	env := specs.RerankKeyEnv(s.rerankKey)
	if s.dual != nil {
		env = append(env, specs.ReembedKeyEnv(s.dual.next.APIKeySecretRef)...)
	}
	return env
}

// apiKeyRef is an API key Secret reference and the field that holds it.
type apiKeyRef struct {
	field string
	ref   *memoryv1alpha1.SecretKeySelector
}
