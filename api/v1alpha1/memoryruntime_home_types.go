package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// Via is the admin connection that reached the tenant there, as
	// cluster/<clusterConnection> or secret/<namespace>/<name>/<key>:
	// recorded at each pass that proves the tenant is there, so that once
	// spec.database names another connection (onChange: Move) the operator
	// still knows the one the tenant is to be moved from.
	// +optional
	// +kubebuilder:validation:MaxLength=600
	Via string `json:"via,omitempty"`
}

// RuntimeEmbedder is the embedder the tenant's stored vectors were made
// with. A spec.embedding that names another provider, model or size while
// the tenant holds vectors starts a re-embed (status.reembed); the service,
// its Jobs and the tenant's provisioning keep this embedder (and its
// dimensions) until the re-embed switches.
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

// EmbedderAccess is how the service reaches an embedder: its endpoint and
// the Secret key holding its API key. The operator records it from
// spec.embedding (which passed the CRD's validation) while the spec names
// the embedder of the stored vectors, so that during a re-embed, when the
// spec names the next one, the service keeps its current embedder without
// the operator reading it back from objects a tenant may edit (the
// ConfigMap, the Deployment).
type EmbedderAccess struct {
	RuntimeEmbedder `json:",inline"`
	// Endpoint is the OpenAI-compatible API's base URL (openai provider).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint,omitempty"`
	// APIKeySecretRef names the Secret key holding the API key.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`
}

// Phases of a re-embed (status.reembed.phase).
const (
	ReembedFilling  = "Filling"  // a Job fills the new vectors
	ReembedPaused   = "Paused"   // the last Job failed; the next one resumes
	ReembedSwitched = "Switched" // every vector is the new embedder's
	ReembedAborted  = "Aborted"  // spec.embedding was set back before the switch
)

// ReembedStatus is the last re-embed of the tenant's vectors after a
// spec.embedding change (docs/operations.md, "Changing the embedding model").
type ReembedStatus struct {
	// From is the embedder of the vectors being replaced.
	From RuntimeEmbedder `json:"from"`
	// To is the embedder of the new vectors.
	To RuntimeEmbedder `json:"to"`
	// Phase is Filling, Paused, Switched or Aborted.
	// +kubebuilder:validation:MaxLength=16
	Phase string `json:"phase"`
	// Filled counts the rows given their new vector so far.
	// +optional
	Filled int64 `json:"filled,omitempty"`
	// Left counts the rows still without their new vector.
	// +optional
	Left int64 `json:"left,omitempty"`
	// Runs numbers the re-embed Jobs, counting on across the runtime's
	// re-embeds: the current one is named <runtime>-reembed-<runs>.
	// +optional
	Runs int32 `json:"runs,omitempty"`
	// StartedAt is when the re-embed began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// FinishedAt is when it switched or was aborted.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}
