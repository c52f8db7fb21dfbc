package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CitusMoveStatus is the outcome of a move of the tenant's schema to
// another Citus worker (citus_schema_move, online).
type CitusMoveStatus struct {
	// To is the worker asked for, host:port.
	To string `json:"to"`
	// From is the worker the schema was on when the move started.
	// +optional
	From string `json:"from,omitempty"`
	// Result is Running while the move copies, then Succeeded or Failed;
	// Waiting while another shard move runs on the Citus cluster (tried
	// again every 15 seconds).
	Result string `json:"result"`
	// Message says how far a running move is, how long the move took, or
	// why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// StartedAt is when the move started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CopiedBytes is the size of the schema's shards on the target at the
	// last progress written while the move ran (get_rebalance_progress();
	// at most one status write per 10 seconds).
	// +optional
	CopiedBytes int64 `json:"copiedBytes,omitempty"`
	// TotalBytes is the size of the schema's shards on the source at that
	// reading: what the move copies.
	// +optional
	TotalBytes int64 `json:"totalBytes,omitempty"`
	// FinishedAt is when the move ended.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// Results of a CitusMoveStatus.
const (
	CitusMoveRunning   = "Running"
	CitusMoveSucceeded = "Succeeded"
	CitusMoveFailed    = "Failed"
	CitusMoveWaiting   = "Waiting"
)
