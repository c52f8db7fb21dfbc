package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemoryDatabaseSpec describes one PostgreSQL server (with pgvector) that
// the platform team offers for tenants.
type MemoryDatabaseSpec struct {
	// SecretRef names the admin connection Secret in the operator's
	// namespace: key (default "uri") with a postgres:// URI, or the keys
	// host, port, dbname, user (or username) and password. The
	// <cluster>-superuser Secret CloudNativePG writes works as it is; its
	// database "*" (any) means databaseName, default postgres.
	SecretRef SecretKeySelector `json:"secretRef"`

	// DatabaseName is the database of that server in which the tenants'
	// schemas live. Default: the one the Secret names, or postgres when it
	// names none or "*" (CloudNativePG's superuser Secret).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.contains('/') && !self.contains('?') && self != '*'",message="databaseName must name one database: no /, ? or *"
	DatabaseName string `json:"databaseName,omitempty"`

	// Capacity bounds how many tenants the operator places here. Absent:
	// no bound.
	// +optional
	Capacity DatabaseCapacity `json:"capacity,omitempty"`

	// AllowedNamespaces selects, by label, the namespaces whose
	// MemoryRuntimes may be placed here, by databaseSelector or by name
	// (databaseRef). Absent: no namespace — a new database takes no tenant
	// until the platform team says whose it is. {} admits every namespace;
	// one namespace by name: matchLabels kubernetes.io/metadata.name: NAME
	// (a label the API server sets and no one can change). Checked once,
	// when a tenant is placed: a tenant placed here stays, and keeps
	// working, when its namespace stops matching (docs/scale-out.md).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="spec.allowedNamespaces.matchLabels may hold at most 64 labels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="spec.allowedNamespaces.matchExpressions may hold at most 16 expressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="each spec.allowedNamespaces.matchExpressions entry may list at most 64 values"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0))",message="spec.allowedNamespaces.matchExpressions: operator In or NotIn takes values, Exists or DoesNotExist none"
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`

	// Cordoned stops the placement of new tenants here, by selector and by
	// name (databaseRef); the tenants already here keep running and are
	// never moved by the operator.
	// +optional
	Cordoned bool `json:"cordoned,omitempty"`
}

// DatabaseCapacity bounds the tenants placed on one database. A database at
// either bound takes no new tenant; those already there stay.
type DatabaseCapacity struct {
	// MaxTenants is the most tenants (MemoryRuntimes) placed here.
	// Absent: no bound.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	MaxTenants *int32 `json:"maxTenants,omitempty"`

	// MaxBytes is the size (status.bytesUsed) from which no new tenant is
	// placed here, such as 200Gi. Absent: no bound.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="capacity.maxBytes must be a positive size such as 200Gi"
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
}

// DatabaseExtension is one extension installed in the database.
type DatabaseExtension struct {
	// Name of the extension (vector, citus, ...).
	Name string `json:"name"`
	// Version installed.
	// +optional
	Version string `json:"version,omitempty"`
}

// CitusStatus says what the operator found of Citus on a database.
type CitusStatus struct {
	// Version of the citus extension.
	// +optional
	Version string `json:"version,omitempty"`
	// Coordinator is true when the connection reaches the cluster's
	// coordinator (where tenant schemas are created).
	// +optional
	Coordinator bool `json:"coordinator,omitempty"`
	// Workers are the active primary worker nodes that hold shards, as host:port.
	// +optional
	// +listType=atomic
	Workers []string `json:"workers,omitempty"`
}

// MemoryDatabaseStatus is what the operator's periodic check of a database
// found. It is written only when something in it changed, so a healthy,
// idle database costs no API write.
type MemoryDatabaseStatus struct {
	// Conditions: Reachable, and Reconciling and Stalled while they are True.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the last generation a check ran for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ServerVersion is PostgreSQL's server_version, such as 17.5.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`

	// Extensions installed in the database (pg_extension).
	// +optional
	// +listType=map
	// +listMapKey=name
	Extensions []DatabaseExtension `json:"extensions,omitempty"`

	// Citus is set when the database is a Citus cluster (the citus
	// extension is installed): its version and worker nodes.
	// +optional
	Citus *CitusStatus `json:"citus,omitempty"`

	// Tenants is the number of MemoryRuntimes placed here (whose
	// status.database.name names this database).
	// +optional
	Tenants int32 `json:"tenants"`

	// BytesUsed is the size of the database (pg_database_size; on Citus the
	// coordinator's plus every worker's), in MiB, written again only when
	// it moved by 1% or 64 MiB.
	// +optional
	BytesUsed *resource.Quantity `json:"bytesUsed,omitempty"`

	// LastCheck is when a check last changed this status. The check runs
	// every --database-check-interval; a check that finds everything as
	// it was writes nothing (the metric
	// engram_operator_database_last_check_timestamp_seconds has the time
	// of every check).
	// +optional
	LastCheck *metav1.Time `json:"lastCheck,omitempty"`
}

// MemoryDatabase is one PostgreSQL server a platform team offers to Engram
// tenants: its admin Secret, capacity and whether new tenants may be placed
// there. A MemoryRuntime names one (spec.database.databaseRef) or selects
// them by label (spec.database.databaseSelector); the operator places each
// new tenant on the eligible database with the most room.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mdb,categories=engram
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=`.status.conditions[?(@.type=="Reachable")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Reachable")].reason`,priority=1
// +kubebuilder:printcolumn:name="Tenants",type=integer,JSONPath=`.status.tenants`
// +kubebuilder:printcolumn:name="Max-Tenants",type=integer,JSONPath=`.spec.capacity.maxTenants`
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=`.status.bytesUsed`
// +kubebuilder:printcolumn:name="Max-Bytes",type=string,JSONPath=`.spec.capacity.maxBytes`,priority=1
// +kubebuilder:printcolumn:name="Cordoned",type=boolean,JSONPath=`.spec.cordoned`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.serverVersion`
// +kubebuilder:printcolumn:name="Citus",type=string,JSONPath=`.status.citus.version`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (at most 63 lower-case letters, digits and -): it is recorded in each tenant's status.database.name"
type MemoryDatabase struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemoryDatabaseSpec   `json:"spec"`
	Status MemoryDatabaseStatus `json:"status,omitempty"`
}

// MemoryDatabaseList is a list of MemoryDatabase.
//
// +kubebuilder:object:root=true
type MemoryDatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemoryDatabase `json:"items"`
}
