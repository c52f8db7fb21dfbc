// Package bootstrap holds what `manager serve` and `manager job` share: the
// environment variables they read, loading the service config file, the
// logger, and opening the tenant's pool and memory store. Keeping it in one
// place means the service and the maintenance jobs can never disagree on how
// a tenant is configured.
package bootstrap

// Environment variables of the service and job containers (the operator fills
// them from Secrets; see docs/configuration.md). Secrets are never flags, so
// they never show up in `ps` or in the pod spec.
const (
	// EnvDatabaseURL is the postgres:// URL of the tenant's login role (key
	// `uri` of the <runtime>-db Secret).
	EnvDatabaseURL = "ENGRAM_DATABASE_URL"
	// EnvEmbeddingAPIKey is the API key of an OpenAI-compatible embeddings API.
	EnvEmbeddingAPIKey = "ENGRAM_EMBEDDING_API_KEY"
	// EnvLLMAPIKey is the API key of an OpenAI-compatible chat API.
	EnvLLMAPIKey = "ENGRAM_LLM_API_KEY"
)
