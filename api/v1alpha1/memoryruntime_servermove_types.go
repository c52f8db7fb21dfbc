package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DatabaseOnChange is what a change of spec.database's connection to
// another server does (spec.database.onChange).
type DatabaseOnChange string

const (
	// OnChangeRefuse keeps the tenant where it is and refuses the change
	// (DatabaseChanged), the behaviour of earlier releases.
	OnChangeRefuse DatabaseOnChange = "Refuse"
	// OnChangeMove moves the tenant to the server the new connection
	// reaches (status.serverMove).
	OnChangeMove DatabaseOnChange = "Move"
)

// Phases of a move to another server (status.serverMove.phase).
const (
	// ServerMovePreparing: the target schema and roles are being created,
	// marked as an incoming copy.
	ServerMovePreparing = "Preparing"
	// ServerMoveCopying: the tables are bulk-copied, in slices.
	ServerMoveCopying = "Copying"
	// ServerMoveCatchingUp: the rows written on the source since they were
	// copied are applied to the target, pass after pass.
	ServerMoveCatchingUp = "CatchingUp"
	// ServerMoveFrozen: writes on the source are refused (the service
	// answers 503, clients retry) while the last rows are copied and both
	// copies compared.
	ServerMoveFrozen = "Frozen"
	// ServerMoveSwitched: the target is the tenant's home
	// (status.connection); the old copy is kept, read-only, until the move
	// is confirmed.
	ServerMoveSwitched = "Switched"
	// ServerMoveConfirmed: the move was confirmed; with reclaimPolicy
	// Delete the old copy was dropped.
	ServerMoveConfirmed = "Confirmed"
	// ServerMoveAborted: the connection was set back before the switch;
	// the incoming copy was dropped and writes resumed on the source.
	ServerMoveAborted = "Aborted"
	// ServerMoveFailed: the move stopped (message says why); writes go on
	// on the source; a new run starts after the grant check interval while
	// spec.database still asks for the move.
	ServerMoveFailed = "Failed"
)

// ServerMoveStatus is a move of the tenant to another PostgreSQL server,
// started by changing spec.database's clusterConnection or
// connectionSecretRef with onChange: Move.
type ServerMoveStatus struct {
	// Run numbers the moves of this runtime; the move-confirmed annotation
	// names the run it confirms.
	Run int32 `json:"run"`
	// From is the server and connection the tenant is moved from.
	From RuntimeConnection `json:"from"`
	// To is the server and connection the tenant is moved to.
	To RuntimeConnection `json:"to"`
	// Phase is Preparing, Copying, CatchingUp, Frozen, Switched,
	// Confirmed, Aborted or Failed.
	// +kubebuilder:validation:MaxLength=16
	Phase string `json:"phase"`
	// StartedAt is when the move began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CopiedRows is how many rows the bulk copy has copied (written at
	// most once per 10 seconds while it runs).
	// +optional
	CopiedRows int64 `json:"copiedRows,omitempty"`
	// TotalRows is how many rows the source held when the copy started.
	// +optional
	TotalRows int64 `json:"totalRows,omitempty"`
	// Passes counts the catch-up passes since the bulk copy ended.
	// +optional
	Passes int32 `json:"passes,omitempty"`
	// LastDelta is how many rows the last catch-up pass applied.
	// +optional
	LastDelta int64 `json:"lastDelta,omitempty"`
	// FreezeStartedAt is when writes on the source were last frozen.
	// +optional
	FreezeStartedAt *metav1.Time `json:"freezeStartedAt,omitempty"`
	// FreezeMillis is how long the writes were frozen before the switch.
	// +optional
	FreezeMillis int64 `json:"freezeMillis,omitempty"`
	// VerifiedRows is how many rows were compared, equal on both servers,
	// before the switch.
	// +optional
	VerifiedRows int64 `json:"verifiedRows,omitempty"`
	// Checksum is the checksum of those rows (the same on both servers).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Checksum string `json:"checksum,omitempty"`
	// SourceMarked is true once the old copy is marked as moved: pointing
	// the connection back at it is refused.
	// +optional
	SourceMarked bool `json:"sourceMarked,omitempty"`
	// Message says how far the move is, or why it stopped.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// FinishedAt is when the move switched, was aborted or failed.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}
