package memory

import (
	"testing"
	"time"
)

// TestReembedConfig: the config's reembed block names a valid next
// embedder and a timeout within 50ms..30s (0, the engine's default, when
// absent).
func TestReembedConfig(t *testing.T) {
	base := ServiceConfig{Schema: "engram_a", Embedding: EmbeddingConfig{Provider: ProviderBuiltin, Dimensions: 384}, Policy: DefaultPolicy()}
	for timeout, want := range map[string]time.Duration{"": 0, "50ms": 50 * time.Millisecond, "2s": 2 * time.Second, "30s": 30 * time.Second} {
		c := base
		c.Reembed = &ReembedConfig{Next: EmbeddingConfig{Provider: ProviderOpenAI, Endpoint: "http://emb/v1", Model: "b", Dimensions: 768}, Timeout: timeout}
		if err := c.Validate(); err != nil {
			t.Fatalf("timeout %q refused: %v", timeout, err)
		}
		if got, _ := c.Reembed.TimeoutDuration(); got != want {
			t.Errorf("timeout %q = %s, want %s", timeout, got, want)
		}
	}
	for name, r := range map[string]ReembedConfig{
		"no provider":      {Next: EmbeddingConfig{Dimensions: 384}},
		"openai, no model": {Next: EmbeddingConfig{Provider: ProviderOpenAI, Endpoint: "http://emb/v1", Dimensions: 768}},
		"builtin too wide": {Next: EmbeddingConfig{Provider: ProviderBuiltin, Dimensions: 8192}},
		"timeout too long": {Next: EmbeddingConfig{Provider: ProviderBuiltin, Dimensions: 768}, Timeout: "31s"},
		"timeout not one":  {Next: EmbeddingConfig{Provider: ProviderBuiltin, Dimensions: 768}, Timeout: "soon"},
	} {
		c := base
		c.Reembed = &r
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
