package localpod

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// TestAvailableStatusIsRolledOut: what the stand-in writes is what it later
// recognizes as done, until the generation or the replica count changes.
func TestAvailableStatusIsRolledOut(t *testing.T) {
	d := &appsv1.Deployment{}
	d.Generation = 3
	d.Spec.Replicas = ptr.To[int32](2)
	if RolledOut(d, DesiredReplicas(d)) {
		t.Fatal("a Deployment without status is rolled out")
	}
	d.Status = AvailableStatus(d, DesiredReplicas(d))
	if !RolledOut(d, 2) {
		t.Fatalf("the available status is not rolled out: %+v", d.Status)
	}
	if RolledOut(d, 3) {
		t.Error("2 available replicas count as a rollout to 3")
	}
	d.Generation = 4
	if RolledOut(d, 2) {
		t.Error("a new generation counts as rolled out before the controller observed it")
	}
	if got := DesiredReplicas(&appsv1.Deployment{}); got != 1 {
		t.Errorf("DesiredReplicas without spec.replicas = %d, want 1", got)
	}
}
