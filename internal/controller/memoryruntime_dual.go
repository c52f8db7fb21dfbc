package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
)

// Dual writes (docs/decisions.md "Dual writes during a re-embed"): while a
// re-embed fills (status.reembed Filling or Paused) the service's config
// names the recorded embedder (status.embedding, what the columns hold) as
// embedding and the spec's as reembed.next, and the Deployment gets the
// next one's key as ENGRAM_REEMBED_EMBEDDING_API_KEY: one rollout when
// the re-embed begins, one at the switch (the spec's embedder, no reembed
// block) or the abort (the recorded one, no reembed block).

// dualEmbedders are the service's embedders during a re-embed: current,
// the recorded embedder with its endpoint and key, and next, the spec's.
type dualEmbedders struct {
	current memoryv1alpha1.EmbeddingSpec
	next    memoryv1alpha1.EmbeddingSpec
}

// serviceRuntime is the runtime the service's config and Deployment are
// rendered from: rt, or during a re-embed rt with the recorded embedder as
// spec.embedding (the next one goes in through s.dual).
func (s *runtimeScope) serviceRuntime() *memoryv1alpha1.MemoryRuntime {
	if s.dual == nil {
		return s.rt
	}
	rt := s.rt.DeepCopy()
	rt.Spec.Embedding = *s.dual.current.DeepCopy()
	return rt
}

// serviceConfig is the service's config of the runtime view svc: during a
// re-embed with reembed.next = the spec's embedder.
func (s *runtimeScope) serviceConfig(svc *memoryv1alpha1.MemoryRuntime, policy memory.Policy, applied *memoryv1alpha1.AppliedPolicy) memory.ServiceConfig {
	cfg := specs.ServiceConfig(svc, s.schema, policy, svc.PolicyName(), generationOf(applied))
	if s.dual != nil {
		cfg = specs.WithReembedNext(cfg, specs.EmbeddingConfig(s.rt))
	}
	return cfg
}

// renderDual lets the reconcile go on to the config and the Deployment
// while a re-embed fills, with the recorded embedder as the service's and
// the spec's as the next. The recorded embedder's endpoint and key are the
// ones status.embeddingAccess recorded from the spec while it named that
// embedder (recordEmbedderAccess); never the live ConfigMap's or
// Deployment's, which a tenant may edit (review 13b: an endpoint edited
// there would have been rendered again for the whole fill, carrying the
// key). Without a record for it (a runtime whose re-embed began before the
// operator recorded one, or the re-embed back after a lost switch) the
// reconcile stops before the config as it did before dual writes: the
// service keeps what it runs, and the Job fills its writes.
func (r reembedder) renderDual(ctx context.Context, s *runtimeScope) (bool, error) {
	have := s.rt.Status.Embedding
	cur := memoryv1alpha1.EmbeddingSpec{Provider: have.Provider, Model: have.Model, Dimensions: have.Dimensions}
	if have.Provider != memoryv1alpha1.EmbeddingBuiltin {
		acc := s.rt.Status.EmbeddingAccess
		if acc == nil || acc.RuntimeEmbedder != *have || acc.Endpoint == "" {
			ctrl.LoggerFrom(ctx).Info("re-embed without dual writes: no recorded endpoint for the current embedder", "embedder", embedderName(*have))
			return true, nil
		}
		cur.Endpoint, cur.APIKeySecretRef = acc.Endpoint, acc.APIKeySecretRef.DeepCopy()
	}
	s.dual = &dualEmbedders{current: cur, next: *s.rt.Spec.Embedding.DeepCopy()}
	return false, nil
}
