package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReclaimPolicy says what happens to a tenant's schema and roles when its
// MemoryRuntime is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the schema, its data and the roles.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete drops the schema (CASCADE) and both roles.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// EmbeddingProvider selects how memory text becomes vectors.
// +kubebuilder:validation:Enum=builtin;openai
type EmbeddingProvider string

const (
	// EmbeddingBuiltin is a deterministic local embedder (feature hashing); no network.
	EmbeddingBuiltin EmbeddingProvider = "builtin"
	// EmbeddingOpenAI is any OpenAI-compatible /v1/embeddings server.
	EmbeddingOpenAI EmbeddingProvider = "openai"
)

// MemoryRuntimeSpec declares one tenant: a schema, a login role and a memory service.
type MemoryRuntimeSpec struct {
	// Database says where the tenant's schema lives and how the operator connects
	// to create it.
	Database DatabaseSpec `json:"database"`

	// PolicyRef names a MemoryPolicy in the same namespace. Without it the
	// built-in defaults apply.
	// +optional
	PolicyRef *LocalObjectReference `json:"policyRef,omitempty"`

	// Embedding configures how memory text becomes vectors.
	// +optional
	// +kubebuilder:default={}
	Embedding EmbeddingSpec `json:"embedding"`

	// LLM is an optional OpenAI-compatible chat endpoint used for dedup
	// arbitration and fact extraction. Without it no LLM call is ever made.
	// +optional
	LLM *LLMSpec `json:"llm,omitempty"`

	// Service configures the memory service Deployment.
	// +optional
	// +kubebuilder:default={}
	Service ServiceSpec `json:"service"`

	// ReclaimPolicy says what happens to the schema and roles when this
	// MemoryRuntime is deleted: Retain (default) keeps them, Delete drops them.
	// Engram never drops a schema it did not create.
	// +optional
	// +kubebuilder:default=Retain
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// Paused stops reconciliation of this runtime: its objects and its
	// database stay as they are (condition Paused). Deleting a paused runtime
	// still carries out its reclaimPolicy.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// DatabaseSpec locates the PostgreSQL database (with pgvector) of a tenant.
// +kubebuilder:validation:XValidation:rule="[has(self.connectionSecretRef), has(self.clusterConnection), has(self.databaseRef), has(self.databaseSelector)].filter(x, x).size() == 1",message="set exactly one of database.connectionSecretRef, database.clusterConnection, database.databaseRef or database.databaseSelector"
// +kubebuilder:validation:XValidation:rule="has(self.schema) == has(oldSelf.schema) && (!has(self.schema) || self.schema == oldSelf.schema)",message="database.schema cannot be changed after creation"
type DatabaseSpec struct {
	// ConnectionSecretRef names a Secret in this namespace holding an admin
	// connection: key (default "uri") with a postgres:// URI, or the keys
	// host, port, dbname, user, password (the format of CloudNativePG and
	// Crunchy PGO user Secrets).
	// +optional
	ConnectionSecretRef *SecretKeySelector `json:"connectionSecretRef,omitempty"`

	// ClusterConnection names an admin connection Secret that the platform team
	// keeps in the operator's namespace, labelled
	// memory.engram.dev/connection=<this name>, so admin credentials never live
	// in tenant namespaces.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ClusterConnection string `json:"clusterConnection,omitempty"`

	// DatabaseRef names one MemoryDatabase (cluster-scoped) to place the
	// tenant on, if it is reachable, not cordoned and has room. The
	// placement is recorded in status.database and never changes: naming
	// another database later is refused (DatabaseChanged).
	// +optional
	DatabaseRef *DatabaseReference `json:"databaseRef,omitempty"`

	// DatabaseSelector selects MemoryDatabases by label: the operator
	// places the new tenant on the eligible one (reachable, not cordoned,
	// under capacity) with the most room, records it in status.database and
	// never moves it. An empty selector selects every MemoryDatabase.
	// Changing the selector later does not move a placed tenant.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="spec.database.databaseSelector.matchLabels may hold at most 64 labels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="spec.database.databaseSelector.matchExpressions may hold at most 16 expressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="each spec.database.databaseSelector.matchExpressions entry may list at most 64 values"
	DatabaseSelector *metav1.LabelSelector `json:"databaseSelector,omitempty"`

	// Schema is the PostgreSQL schema of the tenant. Default: derived from
	// namespace and name ("engram_<namespace>_<name>_<hash of both>",
	// sanitized, at most 56 bytes); a name given here may not start with
	// "engram_" and has at most 56 bytes, so its role names are never cut. Cannot be changed after creation. Naming
	// a schema does not give access to it: a schema created for another
	// MemoryRuntime (its UID is in the schema's ownership marker) is refused.
	// +optional
	// +kubebuilder:validation:MaxLength=56
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('engram_')",message="database.schema must not start with engram_: that prefix is reserved for the names Engram derives from namespace and name (leave database.schema out to get one)"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pg_')",message="database.schema must not start with pg_ (reserved by PostgreSQL)"
	// +kubebuilder:validation:XValidation:rule="!(self in ['public', 'information_schema', 'engram_control'])",message="database.schema must name a schema of its own, not public, information_schema or engram_control (the operator's bookkeeping)"
	Schema string `json:"schema,omitempty"`

	// SynchronousCommit is the durability of the memory service's and the
	// jobs' writes. "on" (the default): a write is acknowledged only once
	// its WAL is flushed, so it survives a crash of PostgreSQL, whatever
	// the server's own synchronous_commit. "off": commits return before the
	// flush, which lowers write latency but loses the writes acknowledged in
	// roughly the last 600 ms (3 × wal_writer_delay) if PostgreSQL crashes.
	// +optional
	// +kubebuilder:validation:Enum=on;off
	SynchronousCommit string `json:"synchronousCommit,omitempty"`

	// OnChange says what a change of clusterConnection or
	// connectionSecretRef to another server does once the tenant lives
	// somewhere: Refuse (default) keeps the service on the old server
	// (DatabaseChanged); Move copies the tenant there online, freezes its
	// writes for seconds, switches (status.serverMove; docs/operations.md).
	// +optional
	// +kubebuilder:validation:Enum=Refuse;Move
	OnChange DatabaseOnChange `json:"onChange,omitempty"`
}

// DatabaseReference names a MemoryDatabase.
type DatabaseReference struct {
	// Name of the MemoryDatabase.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}

// RuntimeDatabase is where a tenant placed on a MemoryDatabase lives.
type RuntimeDatabase struct {
	// Name of the MemoryDatabase the tenant was placed on. Set once, when
	// the tenant is placed, and never changed by the operator.
	Name string `json:"name"`
}

// EmbeddingSpec configures the embedder of a tenant.
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'openai' || (has(self.endpoint) && has(self.model))",message="embedding.endpoint and embedding.model are required when embedding.provider is openai"
type EmbeddingSpec struct {
	// Provider is builtin (deterministic, local, the default) or openai (any
	// OpenAI-compatible /v1/embeddings server: OpenAI, Ollama, vLLM, TEI, LiteLLM).
	// +optional
	// +kubebuilder:default=builtin
	Provider EmbeddingProvider `json:"provider,omitempty"`

	// Dimensions is the size of the vectors. It must match what the model
	// returns. Changing it on a tenant with vectors re-embeds them, as a
	// change of model does (status.reembed; refused on Citus); on a tenant
	// without a vector the columns take the new size at once.
	// +optional
	// +kubebuilder:default=384
	// +kubebuilder:validation:Minimum=64
	// +kubebuilder:validation:Maximum=4096
	Dimensions int32 `json:"dimensions,omitempty"`

	// Model is the embedding model name sent to the server (openai provider).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// Endpoint is the base URL of the OpenAI-compatible API, including /v1
	// (for example https://api.openai.com/v1 or http://ollama:11434/v1).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="embedding.endpoint must be an http or https URL"
	Endpoint string `json:"endpoint,omitempty"`

	// APIKeySecretRef names the Secret key (default "apiKey") holding the API key.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`
}

// LLMSpec configures an OpenAI-compatible chat completions endpoint.
type LLMSpec struct {
	// Endpoint is the base URL of the OpenAI-compatible API, including /v1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="llm.endpoint must be an http or https URL"
	Endpoint string `json:"endpoint"`

	// Model is the chat model name sent to the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model"`

	// Timeout bounds one LLM call (arbitration of a write, or fact
	// extraction), retries included: a duration such as "10s", "90s" or
	// "2m", between 1s and 5m. Default 10s. When it runs out, arbitration
	// falls back to inserting and extraction answers 502.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('5m')",message="llm.timeout must be a duration such as 10s, 90s or 2m, between 1s and 5m"
	Timeout string `json:"timeout,omitempty"`

	// APIKeySecretRef names the Secret key (default "apiKey") holding the API key.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`
}

// ServiceSpec configures the memory service Deployment and Service.
type ServiceSpec struct {
	// Replicas of the memory service.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Replicas *int32 `json:"replicas,omitempty"`

	// Image of the memory service. Default: the operator's own image, so the
	// service, the jobs and the schema version always match.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// Resources of the memory service container.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.limits) || size(self.limits) <= 16) && (!has(self.requests) || size(self.requests) <= 16) && (!has(self.claims) || size(self.claims) <= 16)",message="spec.service.resources may name at most 16 limits, 16 requests and 16 claims"
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Port the memory service listens on and the Service exposes.
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// NetworkPolicy restricts who may connect to the memory service port.
	// Default: a NetworkPolicy that admits pods of this runtime's namespace
	// only. See MemoryRuntimeNetworkPolicy.
	// +optional
	NetworkPolicy *MemoryRuntimeNetworkPolicy `json:"networkPolicy,omitempty"`

	// Limits bound what the service does for one caller and what it
	// answers: rate limits per credential and the byte cap of answers. See
	// ServiceLimits.
	// +optional
	Limits *ServiceLimits `json:"limits,omitempty"`
	// NodeSelector of the memory service pods and of the maintenance job
	// pods of this runtime.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the memory service pods and of the maintenance job
	// pods of this runtime.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity of the memory service pods. Without podAntiAffinity the
	// operator adds a preferred one that spreads the replicas over nodes
	// (topology key kubernetes.io/hostname); set podAntiAffinity: {} for
	// none. The maintenance job pods get nodeAffinity only.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of the memory service pods. A constraint
	// without labelSelector gets the selector of this runtime's service
	// pods (one that selects nothing would constrain nothing).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of the memory service pods and of the maintenance
	// job pods of this runtime.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// PodDisruptionBudget of the memory service: with more than one
	// replica the operator keeps a PodDisruptionBudget <runtime> that lets
	// voluntary disruptions (a node drain) evict one pod at a time. See
	// ServicePodDisruptionBudget.
	// +optional
	PodDisruptionBudget *ServicePodDisruptionBudget `json:"podDisruptionBudget,omitempty"`

	// TLS serves the memory service over HTTPS with the certificate of a
	// Secret, and status.endpoint becomes an https URL. See ServiceTLS.
	// +optional
	TLS *ServiceTLS `json:"tls,omitempty"`
}

// AppliedPolicy records which policy a runtime's config was resolved from.
type AppliedPolicy struct {
	// Name of the MemoryPolicy, empty for the built-in defaults.
	// +optional
	Name string `json:"name,omitempty"`
	// Generation of the MemoryPolicy that was applied.
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

// MemoryRuntimeStatus is the observed state of a MemoryRuntime.
type MemoryRuntimeStatus struct {
	// Conditions: Ready, DatabaseReady, ServiceAvailable, Paused, and Reconciling and Stalled while they are True.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the last generation the operator fully acted on (a reconcile that ended without error; the Reconciling condition says whether something still waits).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Schema is the PostgreSQL schema of the tenant.
	// +optional
	Schema string `json:"schema,omitempty"`

	// Database is the MemoryDatabase the tenant was placed on (runtimes
	// with spec.database.databaseRef or databaseSelector). Recorded before
	// anything is created there, and never changed by the operator.
	// +optional
	Database *RuntimeDatabase `json:"database,omitempty"`

	// Connection is the server and database the tenant lives on (see
	// RuntimeConnection), recorded when it is provisioned.
	// +optional
	Connection *RuntimeConnection `json:"connection,omitempty"`

	// Embedding is the embedder of the tenant's stored vectors (see
	// RuntimeEmbedder).
	// +optional
	Embedding *RuntimeEmbedder `json:"embedding,omitempty"`

	// EmbeddingAccess is how the service reaches the embedder of the stored
	// vectors (see EmbedderAccess): recorded while spec.embedding names it,
	// kept through a re-embed.
	// +optional
	EmbeddingAccess *EmbedderAccess `json:"embeddingAccess,omitempty"`

	// Reembed is the re-embed under way, or the last one (see ReembedStatus).
	// +optional
	Reembed *ReembedStatus `json:"reembed,omitempty"`

	// SchemaVersion is the migration version the schema is at.
	// +optional
	SchemaVersion int32 `json:"schemaVersion,omitempty"`

	// CitusWorker is the Citus worker node (host:port, as the coordinator's
	// pg_dist_node names it) that holds the schema, when the database is a
	// Citus coordinator; empty on plain PostgreSQL.
	// +optional
	CitusWorker string `json:"citusWorker,omitempty"`

	// CitusMove is the last move of the schema to another Citus worker,
	// asked for with the annotation memory.engram.dev/move-to-worker.
	// +optional
	CitusMove *CitusMoveStatus `json:"citusMove,omitempty"`

	// ServerMove is the move of the tenant to another server under way, or
	// the last one (spec.database.onChange: Move; see ServerMoveStatus).
	// +optional
	ServerMove *ServerMoveStatus `json:"serverMove,omitempty"`

	// Endpoint is the in-cluster URL of the memory service.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// CredentialsSecret names the Secret with the tenant role's credentials.
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`

	// APITokenSecret names the Secret with the bearer tokens of the service.
	// +optional
	APITokenSecret string `json:"apiTokenSecret,omitempty"`

	// Policy is the MemoryPolicy (name and generation) the current config comes from.
	// +optional
	Policy *AppliedPolicy `json:"policy,omitempty"`

	// ConfigHash is the hash of the resolved config carried by the pod template.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`

	// RotatedCredentials is the last rotate-credentials annotation value acted on.
	// +optional
	RotatedCredentials string `json:"rotatedCredentials,omitempty"`
}

// The last rule below (issue 29): a spec.embedding change while a re-embed
// runs (status.reembed Filling or Paused; on an update of the object the API
// server keeps its stored status) must name the same embedder as before or
// the re-embed's from (a rollback). Embedders compare as the operator's
// embedderOf does: provider, model (none for builtin), dimensions, defaults
// applied. Status writes never change spec, so they always pass. Fields are
// read with has(), not optionals, and the message leaves out dimensions:
// optionals and string(int) make the estimated cost unbounded. The empty
// string is written "" in raw-string marker values: gofmt turns '' in a doc
// comment into a typographic quote.

// MemoryRuntime is one tenant of Engram: a PostgreSQL schema with pgvector, a
// login role that can touch only that schema, and a memory service for it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mrt,categories=engram
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Schema",type=string,JSONPath=`.status.schema`
// +kubebuilder:printcolumn:name="Database",type=string,JSONPath=`.status.database.name`
// +kubebuilder:printcolumn:name="Citus-Worker",type=string,JSONPath=`.status.citusWorker`,priority=1
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyRef.name`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 53",message="metadata.name must be at most 53 characters so that derived names (<name>-api-token) fit"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label: lower-case letters, digits and -, starting with a letter (it also names the Service)"
// +kubebuilder:validation:XValidation:rule=`!(has(self.status) && has(self.status.reembed) && self.status.reembed.phase in ['Filling', 'Paused']) || self.spec.embedding == oldSelf.spec.embedding || ((has(self.spec.embedding.provider) ? self.spec.embedding.provider : 'builtin') == (has(oldSelf.spec.embedding.provider) ? oldSelf.spec.embedding.provider : 'builtin') && ((has(self.spec.embedding.provider) ? self.spec.embedding.provider : 'builtin') == 'builtin' || !has(self.spec.embedding.model) ? "" : self.spec.embedding.model) == ((has(oldSelf.spec.embedding.provider) ? oldSelf.spec.embedding.provider : 'builtin') == 'builtin' || !has(oldSelf.spec.embedding.model) ? "" : oldSelf.spec.embedding.model) && (has(self.spec.embedding.dimensions) ? self.spec.embedding.dimensions : 384) == (has(oldSelf.spec.embedding.dimensions) ? oldSelf.spec.embedding.dimensions : 384)) || ((has(self.spec.embedding.provider) ? self.spec.embedding.provider : 'builtin') == (has(self.status.reembed.from.provider) ? self.status.reembed.from.provider : 'builtin') && ((has(self.spec.embedding.provider) ? self.spec.embedding.provider : 'builtin') == 'builtin' || !has(self.spec.embedding.model) ? "" : self.spec.embedding.model) == ((has(self.status.reembed.from.provider) ? self.status.reembed.from.provider : 'builtin') == 'builtin' || !has(self.status.reembed.from.model) ? "" : self.status.reembed.from.model) && (has(self.spec.embedding.dimensions) ? self.spec.embedding.dimensions : 384) == (has(self.status.reembed.from.dimensions) ? self.status.reembed.from.dimensions : 384))`,message="spec.embedding cannot change while a re-embed runs: set spec.embedding back to status.reembed.from to cancel it, or wait until status.reembed.phase is Switched",messageExpression=`'spec.embedding cannot change while a re-embed to ' + self.status.reembed.to.provider + (has(self.status.reembed.to.model) && self.status.reembed.to.model != "" ? ' model ' + self.status.reembed.to.model : "") + ' runs (status.reembed.phase ' + self.status.reembed.phase + '): set spec.embedding back to ' + 'provider ' + self.status.reembed.from.provider + (has(self.status.reembed.from.model) && self.status.reembed.from.model != "" ? ', model ' + self.status.reembed.from.model : "") + ' to cancel it, or wait until status.reembed.phase is Switched'`,fieldPath=.spec.embedding,reason=FieldValueForbidden
type MemoryRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemoryRuntimeSpec   `json:"spec"`
	Status MemoryRuntimeStatus `json:"status,omitempty"`
}

// MemoryRuntimeList is a list of MemoryRuntime.
//
// +kubebuilder:object:root=true
type MemoryRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemoryRuntime `json:"items"`
}
