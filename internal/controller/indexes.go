package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// Field indexes of the cache, so a change of one object finds the objects
// that depend on it without listing everything.
const (
	// indexPolicyRef: MemoryRuntime by spec.policyRef.name.
	indexPolicyRef = "spec.policyRef.name"
	// indexSecretRefs: MemoryRuntime by the names of the Secrets of its
	// namespace it reads (connection, API keys, TLS).
	indexSecretRefs = "spec.secretRefs"
	// indexClusterConnection: MemoryRuntime by spec.database.clusterConnection.
	indexClusterConnection = "spec.database.clusterConnection"
	// indexPlacedDatabase: MemoryRuntime by status.database.name (the
	// tenants of a MemoryDatabase).
	indexPlacedDatabase = "status.database.name"
	// indexAwaitingPlacement: MemoryRuntime with databaseRef or
	// databaseSelector and no status.database yet, under "true".
	indexAwaitingPlacement = "placement.awaiting"
	// indexDatabaseSecret: MemoryDatabase by spec.secretRef.name.
	indexDatabaseSecret = "spec.secretRef.name"
	// indexPolicySecret: MemoryPolicy by the Secret of its reranker's key.
	indexPolicySecret = "spec.reranking.apiKeySecretRef.name"
)

func registerIndexes(ctx context.Context, idx client.FieldIndexer) error {
	for _, i := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&memoryv1alpha1.MemoryRuntime{}, indexPolicyRef, func(o client.Object) []string {
			if name := o.(*memoryv1alpha1.MemoryRuntime).PolicyName(); name != "" {
				return []string{name}
			}
			return nil
		}},
		{&memoryv1alpha1.MemoryRuntime{}, indexSecretRefs, func(o client.Object) []string {
			return referencedSecrets(o.(*memoryv1alpha1.MemoryRuntime))
		}},
		{&memoryv1alpha1.MemoryRuntime{}, indexClusterConnection, func(o client.Object) []string {
			if c := o.(*memoryv1alpha1.MemoryRuntime).Spec.Database.ClusterConnection; c != "" {
				return []string{c}
			}
			return nil
		}},
		{&memoryv1alpha1.MemoryRuntime{}, indexPlacedDatabase, func(o client.Object) []string {
			if name := o.(*memoryv1alpha1.MemoryRuntime).PlacedDatabase(); name != "" {
				return []string{name}
			}
			return nil
		}},
		{&memoryv1alpha1.MemoryRuntime{}, indexAwaitingPlacement, func(o client.Object) []string {
			if rt := o.(*memoryv1alpha1.MemoryRuntime); rt.UsesMemoryDatabase() && rt.PlacedDatabase() == "" {
				return []string{"true"}
			}
			return nil
		}},
		{&memoryv1alpha1.MemoryPolicy{}, indexPolicySecret, func(o client.Object) []string {
			if r := o.(*memoryv1alpha1.MemoryPolicy).Spec.Reranking; r != nil && r.APIKeySecretRef != nil {
				return []string{r.APIKeySecretRef.Name}
			}
			return nil
		}},
		{&memoryv1alpha1.MemoryDatabase{}, indexDatabaseSecret, func(o client.Object) []string {
			return []string{o.(*memoryv1alpha1.MemoryDatabase).Spec.SecretRef.Name}
		}},
	} {
		if err := idx.IndexField(ctx, i.obj, i.field, i.fn); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", i.obj, i.field, err)
		}
	}
	return nil
}

// referencedSecrets are the Secrets of its own namespace a runtime reads.
func referencedSecrets(rt *memoryv1alpha1.MemoryRuntime) []string {
	var out []string
	if ref := rt.Spec.Database.ConnectionSecretRef; ref != nil {
		out = append(out, ref.Name)
	}
	if ref := rt.Spec.Embedding.APIKeySecretRef; ref != nil {
		out = append(out, ref.Name)
	}
	if rt.Spec.LLM != nil && rt.Spec.LLM.APIKeySecretRef != nil {
		out = append(out, rt.Spec.LLM.APIKeySecretRef.Name)
	}
	if name := rt.TLSSecretName(); name != "" {
		out = append(out, name)
	}
	return out
}
