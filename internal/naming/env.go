package naming

// Environment variables of the service and job containers (the operator
// fills them from Secrets; see docs/configuration.md). Secrets are never
// flags, so they never show up in `ps` or in the pod spec.
const (
	// EnvDatabaseURL is the postgres:// URL of the tenant's login role (key
	// `uri` of the <runtime>-db Secret).
	EnvDatabaseURL = "ENGRAM_DATABASE_URL"
	// EnvEmbeddingAPIKey is the API key of an OpenAI-compatible embeddings API.
	EnvEmbeddingAPIKey = "ENGRAM_EMBEDDING_API_KEY"
	// EnvReembedEmbeddingAPIKey is the API key of the embedder a re-embed
	// fills toward (the service's config reembed.next: dual writes).
	EnvReembedEmbeddingAPIKey = "ENGRAM_REEMBED_EMBEDDING_API_KEY"
	// EnvLLMAPIKey is the API key of an OpenAI-compatible chat API.
	EnvLLMAPIKey = "ENGRAM_LLM_API_KEY"
	// EnvExportS3AccessKeyID and EnvExportS3SecretAccessKey are the access
	// key of a RetentionJob's S3 export destination (spec.export.s3).
	EnvExportS3AccessKeyID     = "ENGRAM_EXPORT_S3_ACCESS_KEY_ID"
	EnvExportS3SecretAccessKey = "ENGRAM_EXPORT_S3_SECRET_ACCESS_KEY"
	// EnvRerankAPIKey is the API key of the policy's reranker (/rerank API).
	EnvRerankAPIKey = "ENGRAM_RERANK_API_KEY"
)

// Environment variables of the operator (config/manager, the Helm chart).
const (
	// EnvServiceImage is the default of --service-image.
	EnvServiceImage = "ENGRAM_IMAGE"
	// EnvWatchNamespaces is the default of --watch-namespaces.
	EnvWatchNamespaces = "WATCH_NAMESPACES"
	// EnvPodNamespace (downward API) is the default of --operator-namespace.
	EnvPodNamespace = "POD_NAMESPACE"
	// EnvPodName (downward API) lets the operator read its own image.
	EnvPodName = "POD_NAME"
)
