package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
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
// the spec's as the next. The recorded embedder's endpoint and key are
// not in status (status.embedding names provider, model and dimensions
// only; the spec that had them is gone): they are the ones the live
// ConfigMap and Deployment carry, which this operator rendered from the
// spec before the change (and renders again with them while it lasts).
// When those objects no longer name the recorded embedder (deleted, or
// edited), the reconcile stops before the config as it did before dual
// writes: the service keeps what it runs, and the Job fills its writes.
func (r reembedder) renderDual(ctx context.Context, s *runtimeScope) (bool, error) {
	have := s.rt.Status.Embedding
	cur := memoryv1alpha1.EmbeddingSpec{Provider: have.Provider, Model: have.Model, Dimensions: have.Dimensions}
	if have.Provider == memoryv1alpha1.EmbeddingOpenAI {
		ok, err := r.liveEmbedderAccess(ctx, s, &cur)
		if err != nil || !ok {
			return true, err
		}
	}
	s.dual = &dualEmbedders{current: cur, next: *s.rt.Spec.Embedding.DeepCopy()}
	return false, nil
}

// liveEmbedderAccess fills cur's endpoint from the live ConfigMap's
// embedding block (when it names cur's provider, model and dimensions, or
// else its reembed.next when that does) and its key from the live
// Deployment's matching variable; false when the ConfigMap names no cur.
func (r reembedder) liveEmbedderAccess(ctx context.Context, s *runtimeScope, cur *memoryv1alpha1.EmbeddingSpec) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	var cm corev1.ConfigMap
	found, err := getOptional(ctx, r.client, client.ObjectKey{Namespace: s.rt.Namespace, Name: naming.ConfigMapName(s.rt.Name)}, &cm)
	if err != nil {
		return false, fmt.Errorf("reading the service's config for the re-embed's dual writes: %w", err)
	}
	var cfg memory.ServiceConfig
	if found {
		if err := yaml.Unmarshal([]byte(cm.Data[naming.KeyConfig]), &cfg); err != nil {
			found = false
		}
	}
	// The recorded embedder is the config's embedding, or its reembed.next
	// after a switch whose rollout has not happened (a switch's status
	// write lost and the spec set back: a re-embed back begins).
	env := naming.EnvEmbeddingAPIKey
	e := cfg.Embedding
	if !names(e, cur) && cfg.Reembed != nil {
		env, e = naming.EnvReembedEmbeddingAPIKey, cfg.Reembed.Next
	}
	if !found || !names(e, cur) || e.Endpoint == "" {
		log.Info("re-embed without dual writes: the live config does not name the recorded embedder's endpoint", "embedder", embedderName(*s.rt.Status.Embedding))
		return false, nil
	}
	cur.Endpoint = e.Endpoint
	var dep appsv1.Deployment
	found, err = getOptional(ctx, r.client, client.ObjectKey{Namespace: s.rt.Namespace, Name: naming.DeploymentName(s.rt.Name)}, &dep)
	if err != nil {
		return false, fmt.Errorf("reading the service's Deployment for the re-embed's dual writes: %w", err)
	}
	if found {
		cur.APIKeySecretRef = liveSecretEnv(&dep, env)
	}
	return true, nil
}

// names reports whether the config's embedder e is cur (endpoint aside).
func names(e memory.EmbeddingConfig, cur *memoryv1alpha1.EmbeddingSpec) bool {
	return e.Provider == string(cur.Provider) && e.Model == cur.Model && e.Dimensions == int(cur.Dimensions)
}

// liveSecretEnv is the Secret key the Deployment's pods read the variable
// name from, nil when none.
func liveSecretEnv(dep *appsv1.Deployment, name string) *memoryv1alpha1.SecretKeySelector {
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, env := range c.Env {
			if env.Name != name || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil {
				continue
			}
			ref := env.ValueFrom.SecretKeyRef
			return &memoryv1alpha1.SecretKeySelector{Name: ref.Name, Key: ref.Key}
		}
	}
	return nil
}
