package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// reconcileAPIToken writes the <name>-api-token Secret: an admin token and
// a signing key at first, and afterwards whatever users put there (see
// APITokenContent for what is ever added).
func (r *MemoryRuntimeReconciler) reconcileAPIToken(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	var live corev1.Secret
	found, err := getOptional(ctx, r.client, client.ObjectKey{Namespace: rt.Namespace, Name: naming.APITokenSecretName(rt.Name)}, &live)
	if err != nil {
		return false, fmt.Errorf("reading the API token Secret: %w", err)
	}
	var whole client.Object
	if found && isCacheStub(&live) && checkOwned("Secret", &live, runtimeOwnerRef(rt)) == nil {
		// The operator's, over the cache's size cap: its tokens are read
		// whole (or the operator would take them for missing and write new
		// ones), unless they were found complete at this very version. A
		// stub that is not the operator's is not read: the apply refuses it.
		if _, ok := r.apply.tokens.recall(live.UID, live.ResourceVersion, apiTokenMetaHash(rt)); ok {
			rt.Status.APITokenSecret = naming.APITokenSecretName(rt.Name)
			return false, nil
		}
		if found, err = getWhole(ctx, r.reader, &live); err != nil {
			return false, fmt.Errorf("reading the API token Secret: %w", err)
		}
		if found {
			whole = &live
		}
	}
	tokens, key, err := specs.APITokenContent(live.Data)
	if err != nil {
		return false, err
	}
	applied, outcome, err := r.apply.applyOver(ctx, specs.APITokenSecret(rt, tokens, key), whole)
	if err != nil {
		s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonApplyFailed, err.Error())
		return false, err
	}
	r.recordApply(rt, applied, outcome)
	if whole != nil && outcome == applyUnchanged {
		// Valid tokens and a key, kept as they are: at this version the
		// Secret needs nothing, as long as rt wants the same of its metadata.
		r.apply.tokens.remember(applied.GetUID(), applied.GetResourceVersion(), apiTokenMetaHash(rt), nil)
	}
	rt.Status.APITokenSecret = naming.APITokenSecretName(rt.Name)
	return false, nil
}

// apiTokenMetaHash hashes what the API token Secret takes from rt (its
// labels, owner reference, type): the rest is the Secret's own content, which
// its resourceVersion stands for.
func apiTokenMetaHash(rt *memoryv1alpha1.MemoryRuntime) string {
	m, err := applyMap(specs.APITokenSecret(rt, "", ""), schema.GroupVersionKind{Version: "v1", Kind: "Secret"})
	if err != nil {
		return "" // remembered never (stubMemo skips an empty hash)
	}
	return wantHash(m)
}
