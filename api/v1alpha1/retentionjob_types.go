package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Operation is one maintenance operation of a RetentionJob.
// +kubebuilder:validation:Enum=decay;expire;purge;compact;summarize;sessions;export
type Operation string

const (
	// OperationDecay forgets active memories whose decay score fell below forgetting.minDecayScore.
	OperationDecay Operation = "decay"
	// OperationExpire soft-deletes memories past their expiry time.
	OperationExpire Operation = "expire"
	// OperationPurge hard-deletes memories inactive for longer than retention.purgeInactiveAfter.
	OperationPurge Operation = "purge"
	// OperationCompact merges clusters of near-duplicate active memories per owner.
	OperationCompact Operation = "compact"
	// OperationSummarize compacts conversation sessions whose unsummarized
	// tokens passed conversation.compaction.threshold into summaries
	// (messages are kept). Not to be confused with compact, which
	// deduplicates memories.
	OperationSummarize Operation = "summarize"
	// OperationSessions deletes conversation sessions idle for longer than
	// conversation.sessionIdleTTL (with their messages and summaries) and
	// archives those idle for longer than conversation.archiveAfter.
	OperationSessions Operation = "sessions"
	// OperationExport writes an export of the whole tenant (docs/export.md)
	// to the destination in spec.export: a PersistentVolumeClaim or an
	// S3-compatible bucket. It runs after the maintenance operations, so
	// the export holds what they left.
	OperationExport Operation = "export"
)

// ConcurrencyPolicy says what happens when a run is due while one still runs.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// ConcurrencyAllow lets runs overlap.
	ConcurrencyAllow ConcurrencyPolicy = "Allow"
	// ConcurrencyForbid skips a run while the previous one is active.
	ConcurrencyForbid ConcurrencyPolicy = "Forbid"
	// ConcurrencyReplace stops the active run and starts the new one.
	ConcurrencyReplace ConcurrencyPolicy = "Replace"
)

// RetentionJobSpec is a maintenance schedule for one runtime or a set of runtimes.
// +kubebuilder:validation:XValidation:rule="has(self.runtimeRef) != has(self.runtimeSelector)",message="set exactly one of runtimeRef or runtimeSelector"
// +kubebuilder:validation:XValidation:rule="!self.operations.exists(o, o == 'export') || has(self.export)",message="operations lists export: set spec.export to a pvc or an s3 destination"
// +kubebuilder:validation:XValidation:rule="!has(self.export) || self.operations.exists(o, o == 'export')",message="spec.export is used by the export operation only: add export to operations, or remove spec.export"
type RetentionJobSpec struct {
	// RuntimeRef names one MemoryRuntime in the same namespace.
	// +optional
	RuntimeRef *LocalObjectReference `json:"runtimeRef,omitempty"`

	// RuntimeSelector selects MemoryRuntimes in the same namespace by label;
	// each gets its own CronJob.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="spec.runtimeSelector.matchLabels may hold at most 64 labels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="spec.runtimeSelector.matchExpressions may hold at most 16 expressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="each spec.runtimeSelector.matchExpressions entry may list at most 64 values"
	RuntimeSelector *metav1.LabelSelector `json:"runtimeSelector,omitempty"`

	// Schedule in 5-field cron format ("minute hour day-of-month month
	// day-of-week"), or a macro such as @daily.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self in ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'] || self.matches('^[0-9*/,-]+ [0-9*/,-]+ [0-9*/,?-]+ [0-9A-Za-z*/,-]+ [0-9A-Za-z*/,?-]+$')",message="schedule must be 5 cron fields separated by single spaces (minute hour day-of-month month day-of-week), e.g. \"0 3 * * *\", or a macro like @daily; put the time zone in timeZone, not in schedule"
	Schedule string `json:"schedule"`

	// TimeZone of the schedule, an IANA name such as "Europe/Berlin". Default:
	// the time zone of the kube-controller-manager (usually UTC).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == 'UTC' || self == 'Local' || self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$')",message="timeZone must be an IANA time zone name such as UTC or Europe/Berlin"
	TimeZone *string `json:"timeZone,omitempty"`

	// Operations to run, in the order decay, expire, purge, compact,
	// summarize, sessions, export whatever the order written here. At least one; no repeats.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	Operations []Operation `json:"operations"`

	// Export is where the export operation writes the tenant's export;
	// required when operations lists export.
	// +optional
	Export *ExportSpec `json:"export,omitempty"`

	// Suspend stops scheduling new runs; running ones finish.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// DryRun counts what each operation would change and changes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Pacing spaces each operation's batches (a duty cycle and/or a rows
	// per second budget) so writers are not queued behind them. Default:
	// dutyPercent 50, no row budget.
	// +optional
	Pacing *PacingSpec `json:"pacing,omitempty"`

	// ConcurrencyPolicy: Forbid (default) skips a run while one is active,
	// Allow runs both (the job's lease in the tenant schema still lets only one work),
	// Replace stops the old run.
	// +optional
	// +kubebuilder:default=Forbid
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// SuccessfulJobsHistoryLimit is how many finished successful Jobs to keep.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// FailedJobsHistoryLimit is how many failed Jobs to keep.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`

	// ActiveDeadlineSeconds bounds how long one run may take. Default 3600:
	// a run whose database hangs is ended, and the next scheduled run retries.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// StartingDeadlineSeconds is how late a run that could not start on
	// time (the control plane was down, say) may still start; later, that
	// run is skipped. Default: the shortest time between two runs of the
	// schedule, so a late run starts unless the next one is due. Without
	// any deadline, a CronJob that missed more than 100 runs would stop
	// scheduling altogether; keep it below 100 times the interval.
	// +optional
	// +kubebuilder:validation:Minimum=10
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// Resources of the job container. Default: requests 100m CPU and
	// 128Mi memory, limit 512Mi memory (no CPU limit). Given here, they
	// replace the default as a whole.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.limits) || size(self.limits) <= 16) && (!has(self.requests) || size(self.requests) <= 16) && (!has(self.claims) || size(self.claims) <= 16)",message="spec.resources may name at most 16 limits, 16 requests and 16 claims"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// RunResult is the outcome of one run.
// +kubebuilder:validation:Enum=Succeeded;Failed;Skipped
type RunResult string

const (
	// RunSucceeded: every operation finished.
	RunSucceeded RunResult = "Succeeded"
	// RunFailed: an operation failed; see message.
	RunFailed RunResult = "Failed"
	// RunSkipped: another run held the tenant's maintenance lock.
	RunSkipped RunResult = "Skipped"
)

// OperationSummary is what one operation of a run did.
type OperationSummary struct {
	// Name of the operation.
	Name Operation `json:"name"`
	// Scanned rows.
	// +optional
	Scanned int64 `json:"scanned,omitempty"`
	// Affected rows (forgotten, expired, purged, or superseded by compaction;
	// sessions summarized, archived or deleted); in a dry run, the rows that would be.
	// +optional
	Affected int64 `json:"affected,omitempty"`
	// DurationMillis is the wall time of the operation.
	// +optional
	DurationMillis int64 `json:"durationMillis,omitempty"`
	// Export is what the export operation wrote.
	// +optional
	Export *ExportOutcome `json:"export,omitempty"`
}

// ExportOutcome is the file or object an export operation wrote.
type ExportOutcome struct {
	// Location of the export: s3://bucket/key, or pvc://claim/path for a
	// file on the claim (path within the claim, subPath included).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Location string `json:"location,omitempty"`
	// Bytes written.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// Records of each kind written (the trailer's counts).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Records map[string]int64 `json:"records,omitempty"`
	// SHA256 of the lines before the trailer, as the trailer says.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256,omitempty"`
}

// LastRun is the summary of the newest finished run.
type LastRun struct {
	// JobName of the batch/v1 Job.
	JobName string `json:"jobName"`
	// Runtime the run maintained.
	// +optional
	Runtime string `json:"runtime,omitempty"`
	// StartTime of the run.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime of the run.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Result of the run.
	Result RunResult `json:"result"`
	// DryRun is true when nothing was changed.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// Operations and their counts.
	// +optional
	// +listType=atomic
	Operations []OperationSummary `json:"operations,omitempty"`
	// Message: the error of a failed run, or why it was skipped.
	// +optional
	Message string `json:"message,omitempty"`
}

// RetentionJobStatus is the observed state of a RetentionJob.
type RetentionJobStatus struct {
	// Conditions: Ready, Scheduled, and Reconciling and Stalled while they are True.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the last generation the operator fully acted on (a reconcile that ended without error; the Reconciling condition says whether something still waits).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// CronJobs are the names of the CronJobs, one per target runtime.
	// +optional
	// +listType=atomic
	CronJobs []string `json:"cronJobs,omitempty"`

	// LastScheduleTime is when a run last started.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// LastSuccessfulTime is when a run last succeeded.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// NextScheduleTime is when the next run is due (absent while suspended).
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// LastRun summarises the newest finished run.
	// +optional
	LastRun *LastRun `json:"lastRun,omitempty"`

	// RunNow is the last run-now annotation value acted on.
	// +optional
	RunNow string `json:"runNow,omitempty"`
}

// RetentionJob runs memory maintenance (decay, expire, purge, compact,
// summarize, sessions) on a schedule, as one batch/v1 CronJob per target
// MemoryRuntime.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rj,categories=engram
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Run",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Result",type=string,JSONPath=`.status.lastRun.result`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40",message="metadata.name must be at most 40 characters so that CronJob and Job names derived from it fit"
type RetentionJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RetentionJobSpec   `json:"spec"`
	Status RetentionJobStatus `json:"status,omitempty"`
}

// RetentionJobList is a list of RetentionJob.
//
// +kubebuilder:object:root=true
type RetentionJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RetentionJob `json:"items"`
}
