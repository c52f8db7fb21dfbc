package localpod

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// TestRolloutStatusIsNotRolledOut: half way through a rollout the stand-in
// reports the pods that serve but not a finished rollout, and Available as
// the real controller computes it (1 of 3 is below 3 - 3/4 = 3: False; 3 of
// 4 is 4 - 1 = 3: True); with every pod updated and available it is
// AvailableStatus.
func TestRolloutStatusIsNotRolledOut(t *testing.T) {
	d := &appsv1.Deployment{}
	d.Generation = 2
	d.Spec.Replicas = ptr.To[int32](3)
	d.Status = RolloutStatus(d, 3, 1, 1)
	if RolledOut(d, 3) {
		t.Fatalf("1 of 3 pods updated counts as rolled out: %+v", d.Status)
	}
	if d.Status.UnavailableReplicas != 2 || d.Status.ObservedGeneration != 2 {
		t.Errorf("status %+v", d.Status)
	}
	if c := condition(d.Status, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("1 of 3 available: Available = %+v, want False (maxUnavailable 25%% rounds down to 0)", c)
	}
	if c := condition(RolloutStatus(d, 4, 4, 3), appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("3 of 4 available: Available = %+v, want True (maxUnavailable 1)", c)
	}
	if c := condition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != "ReplicaSetUpdated" {
		t.Errorf("mid-rollout Progressing = %+v, want reason ReplicaSetUpdated", c)
	}
	d.Status = RolloutStatus(d, 3, 3, 0)
	if c := condition(d.Status, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("no available pod: Available = %+v, want False", c)
	}
	d.Status = RolloutStatus(d, 3, 3, 3)
	if !RolledOut(d, 3) {
		t.Errorf("every pod updated and available is not rolled out: %+v", d.Status)
	}
	if c := condition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != "NewReplicaSetAvailable" {
		t.Errorf("finished rollout: Progressing = %+v, want reason NewReplicaSetAvailable", c)
	}
}

func condition(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}
