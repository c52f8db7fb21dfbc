package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
)

// textSearchConfig is the text search configuration provisioning gives the
// runtime's tenant: its policy's (the default's without a policyRef), or
// "" (keep the tenant's) while the policy is missing or invalid, so a
// policy deleted by mistake does not rebuild a German tenant's text index
// in English. reconcileConfig reports the policy's problem.
func (r *MemoryRuntimeReconciler) textSearchConfig(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime) (string, error) {
	name := rt.PolicyName()
	if name == "" {
		return memory.DefaultPolicy().Search.TextConfig(), nil
	}
	var mp memoryv1alpha1.MemoryPolicy
	found, err := getOptional(ctx, r.client, client.ObjectKey{Namespace: rt.Namespace, Name: name}, &mp)
	if err != nil {
		return "", fmt.Errorf("reading MemoryPolicy %q: %w", name, err)
	}
	if !found {
		return "", nil
	}
	policy, reason, _ := runtimePolicy(name, &mp)
	if reason != "" {
		return "", nil
	}
	return policy.Search.TextConfig(), nil
}
