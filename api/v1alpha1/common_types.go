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
	// ConditionReachable is True when the last check of a MemoryDatabase
	// connected to it with its admin Secret.
	ConditionReachable = "Reachable"
	// ConditionMoving is True while the tenant is being moved to another
	// server (status.serverMove), False once the move switched, was
	// refused, aborted or failed (the reason says which).
	ConditionMoving = "Moving"
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
	// ReasonSpecTooLarge: the object is larger than the operator reads
	// (docs/security.md); it changes nothing for it until it is shortened.
	ReasonSpecTooLarge = "SpecTooLarge"

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
	// ReasonTextSearchDeferred (event): the policy's new text search
	// configuration waits, because the tenant's previous switch was less
	// than the operator's --text-search-min-interval ago (each switch
	// parses every row of the tenant and builds an index).
	ReasonTextSearchDeferred = "TextSearchDeferred"
	// ReasonDBAActionNeeded: the Warning event of a provisioning that
	// succeeded but found something only a DBA can repair (the admin is not
	// a superuser), e.g. tenants that may still take advisory locks; the
	// message says what to run.
	ReasonDBAActionNeeded = "DBAActionNeeded"
	// ReasonProvisioningBlocked: a provisioning statement waited for
	// sessions the operator may not or could not end (a DBA's, the
	// tenant's own, or another tenant's without pg_signal_backend) and
	// timed out; the message names them. Also the Warning event while it
	// waits.
	ReasonProvisioningBlocked = "ProvisioningBlocked"
	// ReasonTenantBlockerEnded: the event on a runtime whose provisioning
	// another tenant's open transaction blocked for longer than the
	// operator's --tenant-blocker-max-age: the operator ended that session.
	ReasonTenantBlockerEnded = "TenantBlockerEnded"
	// ReasonTransactionEnded: the event on the runtime whose login role's
	// session the operator ended, because it blocked another runtime's
	// provisioning for too long, or because its transaction held back the
	// cleanup (VACUUM) of the whole database for too long (the reaper).
	ReasonTransactionEnded = "TransactionEnded"
	// ReasonLocksExceeded: the event on the runtime whose login role's
	// session the operator ended because it held more locks in the
	// server's shared lock table than the operator's --tenant-lock-threshold
	// (the lock watchdog): one session can fill that table for every
	// database of the server.
	ReasonLocksExceeded = "LocksExceeded"
	// ReasonConnectionShareTooSmall: the Warning event of a provisioning
	// whose runtime needs more connections (2 × replicas × the service's
	// pool, plus the jobs) than its login role's CONNECTION LIMIT, the
	// namespace's part of --tenant-connection-share; the message names
	// both numbers.
	ReasonConnectionShareTooSmall = "ConnectionShareTooSmall"
	// ReasonConnectionShareExhausted: the runtime is refused because its
	// namespace already has as many runtimes on the server as
	// --tenant-connection-share has slots (each login role needs at least
	// one); the message names the share, the slots and the runtimes.
	ReasonConnectionShareExhausted = "ConnectionShareExhausted"

	// ReasonPolicyNotFound: spec.policyRef names a MemoryPolicy that does not exist.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonPolicyInvalid: the referenced MemoryPolicy fails its semantic checks.
	ReasonPolicyInvalid = "PolicyInvalid"
	// ReasonSecretNotFound: a Secret named in spec (API key, TLS) does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonTLSSecretInvalid: the Secret of spec.service.tls holds no usable
	// certificate and key (missing keys, not PEM, a key that does not
	// match, an expired certificate); see the message.
	ReasonTLSSecretInvalid = "TLSSecretInvalid"
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
	// ReasonConnected: Reachable=True; the message has the server version.
	ReasonConnected = "Connected"
	// ReasonCheckFailed: Reachable=False: the check of a MemoryDatabase
	// connected, but reading the version, extensions or size failed; see
	// the message.
	ReasonCheckFailed = "CheckFailed"
	// ReasonPlaced: the event of a tenant placed on a MemoryDatabase; the
	// message says why that one.
	ReasonPlaced = "Placed"
	// ReasonNoDatabaseAvailable: no MemoryDatabase can take a new tenant:
	// none matches databaseRef or databaseSelector, or every match is
	// cordoned or at its capacity; the message says why for each.
	ReasonNoDatabaseAvailable = "NoDatabaseAvailable"
	// ReasonWaitingForDatabase: a MemoryDatabase that could take the new
	// tenant has not been checked yet or is unreachable; placement waits.
	ReasonWaitingForDatabase = "WaitingForDatabase"
	// ReasonNamespaceNotAllowed: every MemoryDatabase the runtime names or
	// selects refuses its namespace (spec.allowedNamespaces absent, or not
	// matching the namespace's labels); the message names each database.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonDatabaseNotFound: the MemoryDatabase a runtime is placed on
	// (status.database.name) does not exist.
	ReasonDatabaseNotFound = "DatabaseNotFound"
	// ReasonDatabaseChanged: spec.database names another database than
	// the one the tenant lives on (status.database.name, or a connection
	// it was provisioned through); the operator never moves a tenant.
	ReasonDatabaseChanged = "DatabaseChanged"
	// ReasonEmbeddingChangeNeedsReembed: spec.embedding names another
	// provider or model than the one the tenant's stored vectors were made
	// with (status.embedding), and the tenant holds vectors, or other
	// dimensions (vectors held or not: the columns change type), on a Citus
	// coordinator, where re-embedding is not supported yet.
	ReasonEmbeddingChangeNeedsReembed = "EmbeddingChangeNeedsReembed"
	// ReasonEmbeddingChanged: the event of a spec.embedding change accepted
	// on a tenant that holds no vector yet.
	ReasonEmbeddingChanged = "EmbeddingChanged"
	// ReasonReembedding: a spec.embedding change on a tenant with vectors
	// is being applied: a re-embed Job gives every vector its new model's
	// vector (status.reembed counts them); the service keeps the recorded
	// embedder until the switch.
	ReasonReembedding = "Reembedding"
	// ReasonEmbedderUnreachable: the re-embed Job stopped because the new
	// embedder kept failing; nothing is lost, the next Job resumes.
	ReasonEmbedderUnreachable = "EmbedderUnreachable"
	// ReasonReembedJobFailed: the re-embed Job failed for another reason
	// than the embedder (its logs say why); the next Job resumes.
	ReasonReembedJobFailed = "ReembedJobFailed"
	// ReasonReembedSwitched: the event of a re-embed's switch: every
	// vector is the new embedder's, status.embedding names it.
	ReasonReembedSwitched = "ReembedSwitched"
	// ReasonReembedAborted: the event of a re-embed cancelled by setting
	// spec.embedding back before the switch.
	ReasonReembedAborted = "ReembedAborted"

	// ReasonMoveInProgress: Moving=True: the tenant is being copied to
	// the server spec.database names now; the service stays on the old one
	// until the switch (status.serverMove says how far).
	ReasonMoveInProgress = "MoveInProgress"
	// ReasonMoved: Moving=False: the move switched; the tenant lives on the
	// new server, the old copy is kept read-only until the move-confirmed
	// annotation names the run.
	ReasonMoved = "Moved"
	// ReasonMoveConfirmed: Moving=False: the move was confirmed (with
	// reclaimPolicy Delete the old copy was dropped).
	ReasonMoveConfirmed = "MoveConfirmed"
	// ReasonMoveAborted: Moving=False: spec.database was set back before
	// the switch; the incoming copy was dropped.
	ReasonMoveAborted = "MoveAborted"
	// ReasonMoveFailed: Moving=False: the move stopped (message says why);
	// the tenant stays on the old server and a new run starts later.
	ReasonMoveFailed = "MoveFailed"
	// ReasonMoveSourceUnknown: onChange Move, but the runtime never
	// recorded which connection reached its tenant (status.connection.via):
	// set spec.database back, let it reconcile once, change it again.
	ReasonMoveSourceUnknown = "MoveSourceUnknown"
	// ReasonMoveWaitsForReembed: a move waits for the re-embed under way
	// (status.reembed Filling or Paused) to switch or be aborted.
	ReasonMoveWaitsForReembed = "MoveWaitsForReembed"
	// ReasonMoveUnsupported: the move is refused: a Citus coordinator on
	// either side, or the new connection reaches another database of the
	// same server (roles are server-wide); nothing was touched.
	ReasonMoveUnsupported = "MoveUnsupported"
	// ReasonMoveFreezeTooLong: the event of a freeze that lasted longer
	// than the operator's --move-freeze-timeout: writes resumed on the
	// source and the move went back to catching up.
	ReasonMoveFreezeTooLong = "MoveFreezeTooLong"

	// ReasonReconcileError: Reconciling=True after a phase failed with an
	// error that is retried with backoff (an API or database request); the
	// message is the error.
	ReasonReconcileError = "ReconcileError"
)
