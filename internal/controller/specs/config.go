package specs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// ServiceConfig is the resolved configuration of a runtime's service and
// jobs (the <runtime>-config ConfigMap's config.yaml), from the runtime, its
// schema and its resolved policy.
func ServiceConfig(rt *memoryv1alpha1.MemoryRuntime, schema string, policy memory.Policy, policyName string, policyGeneration int64) memory.ServiceConfig {
	cfg := memory.ServiceConfig{
		Schema:             schema,
		Embedding:          EmbeddingConfig(rt),
		Policy:             policy,
		PolicyName:         policyName,
		PolicyGeneration:   policyGeneration,
		AsynchronousCommit: rt.Spec.Database.SynchronousCommit == "off",
	}
	if rt.Spec.LLM != nil {
		cfg.LLM = &memory.LLMConfig{Endpoint: rt.Spec.LLM.Endpoint, Model: rt.Spec.LLM.Model, Timeout: rt.Spec.LLM.Timeout}
	}
	if l := rt.Spec.Service.Limits; l != nil {
		cfg.MaxResponseBytes = int(l.MaxResponseBytes)
	}
	return cfg
}

// EmbeddingConfig is the config's embedding block of rt's spec.embedding.
func EmbeddingConfig(rt *memoryv1alpha1.MemoryRuntime) memory.EmbeddingConfig {
	return memory.EmbeddingConfig{
		Provider:   string(rt.EmbeddingProvider()),
		Dimensions: int(rt.EmbeddingDimensions()),
		Model:      rt.Spec.Embedding.Model,
		Endpoint:   rt.Spec.Embedding.Endpoint,
	}
}

// WithReembedNext is cfg whose writes also embed with next, the embedder
// a re-embed fills toward (dual writes: cfg.Embedding stays the embedder
// the tenant's vectors are made with). Its key is the environment's
// ENGRAM_REEMBED_EMBEDDING_API_KEY (ReembedKeyEnv).
func WithReembedNext(cfg memory.ServiceConfig, next memory.EmbeddingConfig) memory.ServiceConfig {
	cfg.Reembed = &memory.ReembedConfig{Next: next}
	return cfg
}

// MarshalServiceConfig renders a config as the YAML of the ConfigMap after
// validating it, so the service never receives a config it would refuse.
func MarshalServiceConfig(cfg memory.ServiceConfig) ([]byte, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("the resolved config is invalid: %w", err)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("rendering the config: %w", err)
	}
	return b, nil
}

// ConfigMap is the <runtime>-config ConfigMap holding config.yaml.
func ConfigMap(rt *memoryv1alpha1.MemoryRuntime, configYAML []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: ownedMeta(rt, naming.ConfigMapName(rt.Name), naming.ComponentConfig),
		Data:       map[string]string{naming.KeyConfig: string(configYAML)},
	}
}

// PodTemplateHash is the value of the pod template's config-hash annotation:
// it changes whenever the config, the credentials or an API key changes, and
// that rolls the pods (env vars and a Secret's old password are read only at
// start).
func PodTemplateHash(configYAML []byte, credentialsDigest string, apiKeyDigests ...string) string {
	b := append([]byte(nil), configYAML...)
	b = append(b, 0)
	b = append(b, credentialsDigest...)
	for _, d := range apiKeyDigests {
		b = append(b, 0)
		b = append(b, d...)
	}
	return naming.SHA256Hex(b)[:32]
}

// ownedMeta is the metadata of an object owned (and garbage-collected with)
// a runtime.
func ownedMeta(rt *memoryv1alpha1.MemoryRuntime, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       rt.Namespace,
		Labels:          naming.RuntimeLabels(rt.Name, component),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rt, memoryv1alpha1.GroupVersion.WithKind("MemoryRuntime"))},
	}
}
