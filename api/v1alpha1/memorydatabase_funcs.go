package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultDatabaseName is the database tenant schemas go to when neither
// spec.databaseName nor the Secret names one (or the Secret says "*").
const DefaultDatabaseName = "postgres"

// SetCondition sets a condition of the database, stamped with its generation.
func (d *MemoryDatabase) SetCondition(condType string, ok bool, reason, message string) {
	setCondition(&d.Status.Conditions, d.Generation, condType, boolStatus(ok), reason, message)
}

// GetCondition returns the condition of that type, or nil.
func (d *MemoryDatabase) GetCondition(condType string) *metav1.Condition {
	return meta.FindStatusCondition(d.Status.Conditions, condType)
}

// SetReconciling: see MemoryRuntime.SetReconciling.
func (d *MemoryDatabase) SetReconciling(reason, message string) {
	setProgress(&d.Status.Conditions, d.Generation, ConditionReconciling, reason, message)
}

// SetStalled: see MemoryRuntime.SetStalled.
func (d *MemoryDatabase) SetStalled(reason, message string) {
	setProgress(&d.Status.Conditions, d.Generation, ConditionStalled, reason, message)
}

// MarkObserved records that the current generation was checked.
func (d *MemoryDatabase) MarkObserved() { d.Status.ObservedGeneration = d.Generation }

// Reachability is what the last check said: True (reachable), False (not),
// or Unknown (never checked, or not since the spec changed).
func (d *MemoryDatabase) Reachability() metav1.ConditionStatus {
	c := d.GetCondition(ConditionReachable)
	if c == nil || c.ObservedGeneration != d.Generation {
		return metav1.ConditionUnknown
	}
	return c.Status
}

// MaxTenants is spec.capacity.maxTenants, or -1 for no bound.
func (d *MemoryDatabase) MaxTenants() int64 {
	if d.Spec.Capacity.MaxTenants == nil {
		return -1
	}
	return int64(*d.Spec.Capacity.MaxTenants)
}

// MaxBytes is spec.capacity.maxBytes in bytes, or -1 for no bound.
func (d *MemoryDatabase) MaxBytes() int64 {
	if d.Spec.Capacity.MaxBytes == nil {
		return -1
	}
	return d.Spec.Capacity.MaxBytes.Value()
}

// BytesUsed is status.bytesUsed in bytes (0 when not known yet).
func (d *MemoryDatabase) BytesUsed() int64 {
	if d.Status.BytesUsed == nil {
		return 0
	}
	return d.Status.BytesUsed.Value()
}

// UsesMemoryDatabase reports whether the runtime is placed on a
// MemoryDatabase (databaseRef or databaseSelector) rather than naming a
// connection Secret.
func (r *MemoryRuntime) UsesMemoryDatabase() bool {
	return r.Spec.Database.DatabaseRef != nil || r.Spec.Database.DatabaseSelector != nil
}

// PlacedDatabase is the MemoryDatabase recorded in status.database, or "".
func (r *MemoryRuntime) PlacedDatabase() string {
	if r.Status.Database == nil {
		return ""
	}
	return r.Status.Database.Name
}
