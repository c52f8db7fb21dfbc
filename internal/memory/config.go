package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
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
}

// Validate checks the whole config.
func (c *ServiceConfig) Validate() error {
	if c.Schema == "" {
		return fmt.Errorf("schema: required")
	}
	switch c.Embedding.Provider {
	case ProviderBuiltin:
		if c.Embedding.Dimensions < 64 || c.Embedding.Dimensions > 4096 {
			return fmt.Errorf("embedding.dimensions: %d must be within 64..4096 for the builtin embedder", c.Embedding.Dimensions)
		}
	case ProviderOpenAI:
		if c.Embedding.Endpoint == "" || c.Embedding.Model == "" {
			return fmt.Errorf("embedding: endpoint and model are required for provider openai")
		}
		if c.Embedding.Dimensions < 1 {
			return fmt.Errorf("embedding.dimensions: required")
		}
	default:
		return fmt.Errorf("embedding.provider: %q must be builtin or openai", c.Embedding.Provider)
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
