package v1alpha1

// RuntimeConnection is the PostgreSQL server and database a tenant lives
// on, as the server itself tells it (never read from a Secret: no host,
// user or password). The operator records it when it provisions the
// tenant and refuses a connection that reaches another server or database
// (DatabaseChanged): the tenant's data would stay behind.
type RuntimeConnection struct {
	// SystemIdentifier is the server's system identifier
	// (pg_control_system()): chosen by initdb, shared by the server's
	// physical replicas and by a restore of its physical backups, different
	// on any other server. Empty when the server does not tell it to the
	// operator's role; then the database's OID is compared and the
	// tenant's schema must exist there.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
	// Database is the name of the database (for people; the OID is compared).
	// +kubebuilder:validation:MaxLength=63
	Database string `json:"database"`
	// DatabaseOID is the OID of the database on that server.
	DatabaseOID int64 `json:"databaseOID"`
}

// RuntimeEmbedder is the embedder the tenant's stored vectors were made
// with. A spec.embedding that names another provider or model while the
// tenant holds data is refused (EmbeddingChangeNeedsReembed): vectors of
// two models cannot be compared, and re-embedding does not exist yet.
type RuntimeEmbedder struct {
	// Provider is builtin or openai.
	// +kubebuilder:validation:MaxLength=32
	Provider EmbeddingProvider `json:"provider"`
	// Model is the model name (empty for builtin, which has one).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`
	// Dimensions is the size of the vectors.
	Dimensions int32 `json:"dimensions"`
}
