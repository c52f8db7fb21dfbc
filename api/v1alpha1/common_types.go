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
	// ConditionReconciling is present (True) while the operator is still
	// acting on the object's current generation: a phase waits for
	// something (a database, a Secret, a Deployment rolling out) or failed
	// and is retried. It is removed once the generation is fully acted on
	// (kstatus convention: an "abnormal-true" condition; Flux and Argo CD
	// read it as InProgress). Ready says independently whether it serves.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is present (True) when acting on the current
	// generation failed in a way retrying cannot fix: a human has to change
	// the spec, the database or a foreign object (kstatus: Failed).
	ConditionStalled = "Stalled"
)

// Reasons of the conditions. They are part of the API: alerts and scripts may
// match on them, so they only ever get added, never renamed.
const (
	// ReasonAvailable: a runtime is serving (Ready=True).
	ReasonAvailable = "Available"
	// ReasonPaused: spec.paused is true.
	ReasonPaused = "Paused"
	// ReasonNotPaused: spec.paused is false (Paused=False).
	ReasonNotPaused = "NotPaused"
	// ReasonDeleting: the object is being deleted and the finalizer runs.
	ReasonDeleting = "Deleting"

	// ReasonConnectionSecretNotFound: the admin connection Secret does not exist.
	ReasonConnectionSecretNotFound = "ConnectionSecretNotFound"
	// ReasonConnectionInvalid: the admin connection Secret cannot be parsed.
	ReasonConnectionInvalid = "ConnectionInvalid"
	// ReasonDatabaseUnreachable: the operator cannot connect to PostgreSQL.
	ReasonDatabaseUnreachable = "DatabaseUnreachable"
	// ReasonExtensionMissing: pgvector is not installed and cannot be created.
	ReasonExtensionMissing = "ExtensionMissing"
	// ReasonSchemaNotManaged: the schema or a role exists but Engram did not create it.
	ReasonSchemaNotManaged = "SchemaNotManaged"
	// ReasonSchemaOwnedByOther: the schema or a role belongs to another
	// MemoryRuntime (its ownership marker carries another UID); the message
	// names that runtime. Nothing is changed.
	ReasonSchemaOwnedByOther = "SchemaOwnedByOther"
	// ReasonDimensionsMismatch: the schema exists with another vector size.
	ReasonDimensionsMismatch = "DimensionsMismatch"
	// ReasonCitusUnsupported: the database is a Citus cluster tenants cannot
	// be placed on (a worker instead of the coordinator, no worker nodes, an
	// old Citus, workers that refuse the tenant's roles); the message says
	// which. Nothing is changed.
	ReasonCitusUnsupported = "CitusUnsupported"
	// ReasonProvisioningFailed: any other provisioning error; see the message.
	ReasonProvisioningFailed = "ProvisioningFailed"
	// ReasonProvisioned: the schema and roles exist, are migrated and granted.
	ReasonProvisioned = "Provisioned"

	// ReasonPolicyNotFound: spec.policyRef names a MemoryPolicy that does not exist.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonPolicyInvalid: the referenced MemoryPolicy fails its semantic checks.
	ReasonPolicyInvalid = "PolicyInvalid"
	// ReasonSecretNotFound: a Secret named in spec (API key) does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonConfigInvalid: the runtime's resolved config fails validation; see the message.
	ReasonConfigInvalid = "ConfigInvalid"
	// ReasonImageNotSet: neither spec.service.image nor the operator's --service-image is set.
	ReasonImageNotSet = "ImageNotSet"
	// ReasonApplyFailed: the API server refused an owned object; see the message.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonObjectNotOwned: an object with the name Engram would use exists
	// and Engram did not create it (it lacks the managed-by label or the
	// owner's controller reference); Engram leaves it alone and retries.
	ReasonObjectNotOwned = "ObjectNotOwned"

	// ReasonDeploying: the Deployment has no available replica yet.
	ReasonDeploying = "Deploying"
	// ReasonMinimumReplicasAvailable: the Deployment has available replicas.
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonScaledToZero: spec.service.replicas is 0.
	ReasonScaledToZero = "ScaledToZero"

	// ReasonValid: a MemoryPolicy passed every check.
	ReasonValid = "Valid"
	// ReasonInvalid: a MemoryPolicy failed a check; the message lists each problem.
	ReasonInvalid = "Invalid"

	// ReasonCronJobsReady: every target runtime has its CronJob.
	ReasonCronJobsReady = "CronJobsReady"
	// ReasonRuntimeNotFound: spec.runtimeRef names a MemoryRuntime that does not exist.
	ReasonRuntimeNotFound = "RuntimeNotFound"
	// ReasonNoRuntimesSelected: spec.runtimeSelector matches no MemoryRuntime.
	ReasonNoRuntimesSelected = "NoRuntimesSelected"
	// ReasonInvalidSchedule: the schedule or time zone cannot be used.
	ReasonInvalidSchedule = "InvalidSchedule"

	// ReasonRollingOut: Reconciling=True while the Deployment has not yet
	// rolled the current pod template out to every replica.
	ReasonRollingOut = "RollingOut"
	// ReasonCredentialsRotated: the event of a login password rotation.
	ReasonCredentialsRotated = "CredentialsRotated"
	// ReasonReconcileError: Reconciling=True after a phase failed with an
	// error that is retried with backoff (an API or database request); the
	// message is the error.
	ReasonReconcileError = "ReconcileError"
)
