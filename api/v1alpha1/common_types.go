package v1alpha1

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeySelector names one key of a Secret in the same namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Key inside the Secret. Each reference documents its default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// Condition types shared by the kinds of this API.
const (
	// ConditionReady is True when the object is fully reconciled and serving.
	ConditionReady = "Ready"
	// ConditionDatabaseReady is True when the tenant schema and roles exist and are migrated.
	ConditionDatabaseReady = "DatabaseReady"
	// ConditionServiceAvailable is True when the memory service Deployment has available replicas.
	ConditionServiceAvailable = "ServiceAvailable"
	// ConditionPaused is True while spec.paused stops reconciliation.
	ConditionPaused = "Paused"
	// ConditionValid is True when a MemoryPolicy passed the semantic checks.
	ConditionValid = "Valid"
	// ConditionScheduled is True when a RetentionJob has its CronJobs in place.
	ConditionScheduled = "Scheduled"
)

// Annotations users set to ask for one-off actions.
const (
	// AnnotationRotateCredentials rotates the tenant role password when its value changes.
	AnnotationRotateCredentials = "memory.engram.dev/rotate-credentials"
	// AnnotationRunNow starts a RetentionJob run at once when its value changes.
	AnnotationRunNow = "memory.engram.dev/run-now"
	// LabelConnection marks an admin connection Secret in the operator namespace;
	// its value is the name that spec.database.clusterConnection refers to.
	LabelConnection = "memory.engram.dev/connection"
)
