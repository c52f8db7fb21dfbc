package modelapi

import (
	"fmt"
	"time"
)

// Embedding providers of EmbeddingConfig.
const (
	ProviderBuiltin = "builtin"
	ProviderOpenAI  = "openai"
)

// EmbeddingConfig selects and configures the embedder. The API key is not
// part of it: it comes from a Secret through the environment.
type EmbeddingConfig struct {
	Provider   string `json:"provider"`
	Dimensions int    `json:"dimensions"`
	Model      string `json:"model,omitempty"`
	// Endpoint is the base URL of an OpenAI-compatible API including /v1.
	Endpoint string `json:"endpoint,omitempty"`
}

// LLMConfig configures an OpenAI-compatible chat endpoint.
type LLMConfig struct {
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Timeout bounds one arbiter or extraction call, retries included: a
	// Go duration such as "10s" or "2m", within MinLLMTimeout..MaxLLMTimeout;
	// empty means DefaultLLMTimeout.
	Timeout string `json:"timeout,omitempty"`
}

// Bounds and default of LLMConfig.Timeout (and the MemoryRuntime's
// spec.llm.timeout).
const (
	DefaultLLMTimeout = 10 * time.Second
	MinLLMTimeout     = time.Second
	MaxLLMTimeout     = 5 * time.Minute
)

// TimeoutDuration is the parsed Timeout, DefaultLLMTimeout when empty.
func (c LLMConfig) TimeoutDuration() (time.Duration, error) {
	if c.Timeout == "" {
		return DefaultLLMTimeout, nil
	}
	d, err := time.ParseDuration(c.Timeout)
	if err != nil || d < MinLLMTimeout || d > MaxLLMTimeout {
		return 0, fmt.Errorf("llm.timeout: %q must be a duration such as 10s, 90s or 2m, within %s..%s", c.Timeout, MinLLMTimeout, MaxLLMTimeout)
	}
	return d, nil
}
