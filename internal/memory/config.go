package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// ServiceConfig is the resolved configuration of one tenant's memory service
// and maintenance jobs: the operator writes it (as YAML) into the
// <runtime>-config ConfigMap, `manager serve` and `manager job` read it.
// Secrets (database URL, API keys, bearer tokens) are not in it.
type ServiceConfig struct {
	// Schema is the tenant's PostgreSQL schema.
	Schema    string          `json:"schema"`
	Embedding EmbeddingConfig `json:"embedding"`
	// LLM is optional; without it no LLM call is ever made.
	LLM    *LLMConfig `json:"llm,omitempty"`
	Policy Policy     `json:"policy"`
	// PolicyName and PolicyGeneration say where Policy came from (informational).
	PolicyName       string `json:"policyName,omitempty"`
	PolicyGeneration int64  `json:"policyGeneration,omitempty"`
	// AsynchronousCommit trades the last ~600 ms of acknowledged writes
	// (lost if PostgreSQL crashes) for commit latency; see SessionSettings.
	AsynchronousCommit bool `json:"asynchronousCommit,omitempty"`
	// MaxResponseBytes caps the JSON size of every window, message list,
	// expansion, history search and context the service answers (the
	// runtime's spec.service.limits.maxResponseBytes); 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int `json:"maxResponseBytes,omitempty"`
	// Reembed names, while the tenant may be re-embedding, the embedder it
	// re-embeds toward: every write of a vector writes that embedder's too
	// (dual writes; NextEmbedder). Its API key is the environment's
	// ENGRAM_REEMBED_EMBEDDING_API_KEY.
	Reembed *ReembedConfig `json:"reembed,omitempty"`
}

// ReembedConfig is the service's side of a re-embed: the next embedder
// and the bound of one call of it.
type ReembedConfig struct {
	Next EmbeddingConfig `json:"next"`
	// Timeout bounds one call of the next embedder (a Go duration,
	// 50ms..30s; default 2s): past it a write is stored without its next
	// vector, which the re-embed's fill gives it later.
	Timeout string `json:"timeout,omitempty"`
}

// Reembed timeouts' bounds.
const (
	MinReembedTimeout = 50 * time.Millisecond
	MaxReembedTimeout = 30 * time.Second
)

// TimeoutDuration is the parsed Timeout, 0 (the engine's default) when empty.
func (c ReembedConfig) TimeoutDuration() (time.Duration, error) {
	if c.Timeout == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(c.Timeout)
	if err != nil || d < MinReembedTimeout || d > MaxReembedTimeout {
		return 0, fmt.Errorf("reembed.timeout: %q must be a duration within %s..%s", c.Timeout, MinReembedTimeout, MaxReembedTimeout)
	}
	return d, nil
}

// Validate checks the whole config.
func (c *ServiceConfig) Validate() error {
	if c.Schema == "" {
		return fmt.Errorf("schema: required")
	}
	if err := validEmbedding("embedding", c.Embedding); err != nil {
		return err
	}
	if c.Reembed != nil {
		if err := validEmbedding("reembed.next", c.Reembed.Next); err != nil {
			return err
		}
		if _, err := c.Reembed.TimeoutDuration(); err != nil {
			return err
		}
	}
	if c.LLM != nil && (c.LLM.Endpoint == "" || c.LLM.Model == "") {
		return fmt.Errorf("llm: endpoint and model are required when llm is set")
	}
	if c.LLM != nil {
		if _, err := c.LLM.TimeoutDuration(); err != nil {
			return err
		}
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return ValidMaxResponseBytes(c.MaxResponseBytes)
}

// validEmbedding checks the embedder config e, named field.
func validEmbedding(field string, e EmbeddingConfig) error {
	switch e.Provider {
	case ProviderBuiltin:
		if e.Dimensions < 64 || e.Dimensions > 4096 {
			return fmt.Errorf("%s.dimensions: %d must be within 64..4096 for the builtin embedder", field, e.Dimensions)
		}
	case ProviderOpenAI:
		if e.Endpoint == "" || e.Model == "" {
			return fmt.Errorf("%s: endpoint and model are required for provider openai", field)
		}
		if e.Dimensions < 1 {
			return fmt.Errorf("%s.dimensions: required", field)
		}
	default:
		return fmt.Errorf("%s.provider: %q must be builtin or openai", field, e.Provider)
	}
	return nil
}

// ParseServiceConfigJSON decodes and validates a config, refusing unknown
// fields so a typo is an error and not a silently ignored setting.
func ParseServiceConfigJSON(b []byte) (*ServiceConfig, error) {
	var c ServiceConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decoding service config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid service config: %w", err)
	}
	return &c, nil
}
