package memory

import (
	"context"
	"net/http"
	"time"

	"github.com/engram-dev/engram/internal/memory/modelapi"
)

// The model clients (embedders, the chat LLM) live in
// internal/memory/modelapi; these names keep the façade's API.

type (
	// Embedder turns texts into vectors of a fixed size.
	Embedder = modelapi.Embedder
	// LLM is an OpenAI-compatible chat model asked for JSON answers.
	LLM = modelapi.LLM
	// EmbeddingConfig selects and configures the embedder.
	EmbeddingConfig = modelapi.EmbeddingConfig
	// LLMConfig configures an OpenAI-compatible chat endpoint.
	LLMConfig = modelapi.LLMConfig
)

// Embedding providers of EmbeddingConfig.
const (
	ProviderBuiltin = modelapi.ProviderBuiltin
	ProviderOpenAI  = modelapi.ProviderOpenAI
)

// Bounds and default of LLMConfig.Timeout.
const (
	DefaultLLMTimeout = modelapi.DefaultLLMTimeout
	MinLLMTimeout     = modelapi.MinLLMTimeout
	MaxLLMTimeout     = modelapi.MaxLLMTimeout
)

// Sleep waits d or until ctx is done (then returns ctx.Err()):
// modelapi.Sleep, for the operator's jobs and the bench.
func Sleep(ctx context.Context, d time.Duration) error { return modelapi.Sleep(ctx, d) }

// ErrUpstream: an embedding or chat model server failed (after retries).
var ErrUpstream = modelapi.ErrUpstream

// NewEmbedder returns the embedder of cfg (modelapi.NewEmbedder).
func NewEmbedder(cfg EmbeddingConfig, apiKey string, client *http.Client) (Embedder, error) {
	return modelapi.NewEmbedder(cfg, apiKey, client)
}

// NewBuiltinEmbedder returns the feature-hashing embedder of dims dimensions.
func NewBuiltinEmbedder(dims int) (Embedder, error) { return modelapi.NewBuiltinEmbedder(dims) }

// NewLLM returns an OpenAI-compatible chat client for cfg (modelapi.NewLLM).
func NewLLM(cfg LLMConfig, apiKey string, client *http.Client) LLM {
	return modelapi.NewLLM(cfg, apiKey, client)
}
