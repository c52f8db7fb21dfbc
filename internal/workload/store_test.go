package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// TestOpenUsesLLMTimeout: the runtime's llm.timeout reaches the store (it
// bounds every arbiter and extraction call); without one the default holds.
// Open connects lazily, so no database is needed.
func TestOpenUsesLLMTimeout(t *testing.T) {
	open := func(timeout string) (*Tenant, error) {
		cfg := &memory.ServiceConfig{Schema: "s", Embedding: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: 64},
			LLM: &memory.LLMConfig{Endpoint: "http://127.0.0.1:1/v1", Model: "m", Timeout: timeout}, Policy: memory.DefaultPolicy()}
		return Open(context.Background(), StoreParams{Config: cfg, DatabaseURL: "postgres://u:p@127.0.0.1:1/db"})
	}
	for timeout, want := range map[string]time.Duration{"": memory.DefaultLLMTimeout, "45s": 45 * time.Second, "2m30s": 150 * time.Second} {
		tn, err := open(timeout)
		if err != nil {
			t.Fatalf("timeout %q: %v", timeout, err)
		}
		if got := tn.Store.LLMTimeout(); got != want || !tn.HasLLM {
			t.Errorf("timeout %q: the store bounds LLM calls by %s, want %s", timeout, got, want)
		}
		tn.Close()
	}
	if _, err := open("forever"); err == nil || !strings.Contains(err.Error(), "llm.timeout") {
		t.Errorf("an invalid timeout: %v", err)
	}
}
