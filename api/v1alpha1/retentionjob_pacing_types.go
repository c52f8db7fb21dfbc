package v1alpha1

// PacingSpec spaces the batches of a RetentionJob's operations so that
// adds and other writes are not queued behind back-to-back batches of I/O,
// WAL and locks (`manager job --duty` and `--rows-per-second`,
// docs/configuration.md). The pauses count toward activeDeadlineSeconds.
type PacingSpec struct {
	// DutyPercent is the share of its wall time a job works: after each
	// batch it pauses the batch's time x (100/dutyPercent - 1), at most 10 s
	// a pause. 100 never pauses; 50 (the default) pauses as long as each
	// batch took, so a run takes up to twice as long as unpaced.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 5 && self <= 100",message="pacing.dutyPercent must be within 5..100 (100 = no pause)"
	DutyPercent *int32 `json:"dutyPercent,omitempty"`

	// RowsPerSecond caps the rows a job's batches touch per second of its
	// wall time (a pause after a batch until the rows done fit). With
	// dutyPercent the longer pause wins. Default: no budget.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000000",message="pacing.rowsPerSecond must be within 1..10000000"
	RowsPerSecond *int64 `json:"rowsPerSecond,omitempty"`
}
