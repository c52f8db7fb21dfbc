package controller

import (
	"context"
	"fmt"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// checkEmbedder keeps the tenant's vectors of one model. status.embedding
// records the embedder the stored vectors were made with; a spec.embedding
// naming another provider or model is accepted at once while the tenant
// holds no vector, and otherwise starts a re-embed (memoryruntime_reembed.go,
// status.reembed): until the switch the service's config and Deployment
// keep the recorded embedder and write the spec's vectors too (dual
// writes, memoryruntime_dual.go).
// Other dimensions always go through a re-embed, which re-types the
// columns: with no vector held it switches at once. On Citus, where
// re-embedding is not supported yet, the change is refused
// (EmbeddingChangeNeedsReembed, Stalled) until spec.embedding is set back.
// A runtime without status.embedding (new, or from an earlier release)
// records its spec's.
func (r *MemoryRuntimeReconciler) checkEmbedder(ctx context.Context, s *runtimeScope) (bool, error) {
	stop, err := r.embedderStep(ctx, s)
	recordEmbedderAccess(s.rt)
	if err != nil || !stop || !reembedActive(s.rt.Status.Reembed) {
		return stop, err
	}
	// A re-embed fills: the reconcile goes on with both embedders in the
	// service's config (dual writes, memoryruntime_dual.go).
	return reembedder{r}.renderDual(ctx, s)
}

// embedderStep is checkEmbedder's step on status.embedding and the
// re-embed; true while a re-embed fills or the change is refused.
func (r *MemoryRuntimeReconciler) embedderStep(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	want := embedderOf(rt)
	have := rt.Status.Embedding
	if have == nil {
		rt.Status.Embedding = &want
		return false, nil
	}
	if reembedActive(rt.Status.Reembed) {
		return reembedder{r}.driveReembed(ctx, s, want)
	}
	if *have == want {
		return false, nil
	}
	// Once seen holding vectors, a tenant is not asked again by this
	// process: the look may scan tables.
	held := r.memory.get(rt.UID).vectorsHeld
	if !held {
		dbctx, cancel := context.WithTimeout(ctx, r.opts.DatabaseTimeout)
		defer cancel()
		var err error
		if held, err = tenant.HoldsVectors(dbctx, s.pool, s.schema); err != nil {
			return false, fmt.Errorf("checking whether the tenant holds vectors before an embedding change: %s", scrubAdmin(err.Error(), s.admin))
		}
		r.memory.update(rt.UID, func(st *runtimeState) { st.vectorsHeld = held })
	}
	if !held && have.Dimensions == want.Dimensions {
		r.eventer().normal(rt, memoryv1alpha1.ReasonEmbeddingChanged, "Embed", "embedder %s → %s: the tenant holds no vector yet", embedderName(*have), embedderName(want))
		rt.Status.Embedding = &want
		return false, nil
	}
	// Vectors held, or other dimensions: the columns must change type,
	// which a re-embed does (on an empty tenant it has no row to fill and
	// switches in this pass, without a Job: driveReembed).
	return reembedder{r}.beginReembed(ctx, s, *have, want)
}

// recordedDimensions is the size of the tenant's vector columns as the
// runtime records it: status.embedding's (the embedder of the stored
// vectors, until a re-embed switches), else spec.embedding's (a new
// runtime). Provisioning checks and migrates with it, so a spec naming
// other dimensions re-embeds instead of failing as DimensionsMismatch.
func recordedDimensions(rt *memoryv1alpha1.MemoryRuntime) int32 {
	if e := rt.Status.Embedding; e != nil && e.Dimensions > 0 {
		return e.Dimensions
	}
	return rt.EmbeddingDimensions()
}

// recordEmbedderAccess records in status.embeddingAccess how the service
// reaches the embedder of the stored vectors while spec.embedding names it
// (its endpoint and key Secret; nothing for builtin). During a re-embed the
// spec names the next embedder and the record stays: the service's config
// keeps the current embedder from it (memoryruntime_dual.go), not from the
// live ConfigMap or Deployment, which a tenant may edit (review 13b).
func recordEmbedderAccess(rt *memoryv1alpha1.MemoryRuntime) {
	have := rt.Status.Embedding
	if have == nil || *have != embedderOf(rt) {
		return
	}
	if have.Provider == memoryv1alpha1.EmbeddingBuiltin {
		rt.Status.EmbeddingAccess = nil
		return
	}
	rt.Status.EmbeddingAccess = &memoryv1alpha1.EmbedderAccess{RuntimeEmbedder: *have,
		Endpoint: rt.Spec.Embedding.Endpoint, APIKeySecretRef: rt.Spec.Embedding.APIKeySecretRef.DeepCopy()}
}

// switchingToDimensions is the size an active re-embed switches the
// columns to (0: none active). Provisioning accepts it beside the recorded
// size: a switch whose status write was lost has already resized the
// columns, and only checkEmbedder, after provisioning, reads the tenant's
// re-embed row and records that switch (review 13, H1).
func switchingToDimensions(rt *memoryv1alpha1.MemoryRuntime) int {
	if re := rt.Status.Reembed; reembedActive(re) {
		return int(re.To.Dimensions)
	}
	return 0
}

// warnEmbedderOnce records the Warning when the runtime enters the refusal,
// not on every reconcile while it lasts.
func (r *MemoryRuntimeReconciler) warnEmbedderOnce(s *runtimeScope, msg string) {
	reason := memoryv1alpha1.ReasonEmbeddingChangeNeedsReembed
	if c := s.orig.GetCondition(memoryv1alpha1.ConditionReady); c != nil && c.Reason == reason {
		return
	}
	if r.memory.get(s.rt.UID).warned == reason {
		return
	}
	r.eventer().warning(s.rt, reason, "Embed", "%s", msg)
	r.memory.update(s.rt.UID, func(st *runtimeState) { st.warned = reason })
}

// embedderOf is the embedder spec.embedding asks for (builtin has one
// model: its model field is ignored).
func embedderOf(rt *memoryv1alpha1.MemoryRuntime) memoryv1alpha1.RuntimeEmbedder {
	e := memoryv1alpha1.RuntimeEmbedder{Provider: rt.EmbeddingProvider(), Model: rt.Spec.Embedding.Model, Dimensions: rt.EmbeddingDimensions()}
	if e.Provider == memoryv1alpha1.EmbeddingBuiltin {
		e.Model = ""
	}
	return e
}

func embedderName(e memoryv1alpha1.RuntimeEmbedder) string {
	if e.Model == "" {
		return fmt.Sprintf("%s (%d dimensions)", e.Provider, e.Dimensions)
	}
	return fmt.Sprintf("%s model %q (%d dimensions)", e.Provider, e.Model, e.Dimensions)
}
