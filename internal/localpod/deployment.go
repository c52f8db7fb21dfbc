package localpod

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The stand-in for the deployment controller, which neither envtest nor the
// local demo runs. The local kubelet, the envtest suite of the operator and
// the operator benchmark all mark Deployments available (or half way
// through a rollout) with it, so the three agree on what "rolled out" looks
// like.

// DesiredReplicas is spec.replicas, or its default of 1.
func DesiredReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// RolledOut reports whether d's status already says what AvailableStatus
// would write: its generation observed, replicas pods updated, ready and
// available, and the Available condition True.
func RolledOut(d *appsv1.Deployment, replicas int32) bool {
	s := d.Status
	if s.ObservedGeneration != d.Generation || s.Replicas != replicas || s.UpdatedReplicas != replicas ||
		s.ReadyReplicas != replicas || s.AvailableReplicas != replicas {
		return false
	}
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// AvailableStatus is the status the deployment controller writes once d's
// current generation runs on replicas pods that are all available.
func AvailableStatus(d *appsv1.Deployment, replicas int32) appsv1.DeploymentStatus {
	return RolloutStatus(d, replicas, replicas, replicas)
}

// RolloutStatus is the status the deployment controller writes while d's
// current generation rolls out to replicas pods: it has observed the
// generation, updated of the pods run the current template and available of
// them serve. Available follows the real controller's rule for the default
// RollingUpdate strategy: True once available >= replicas - maxUnavailable,
// where maxUnavailable is 25 % of replicas rounded down (so with 3 replicas
// all 3 must be available, and 1 of 3 is Available False). Progressing says
// the rollout is under way until every pod is updated and available, when
// it is AvailableStatus.
func RolloutStatus(d *appsv1.Deployment, replicas, updated, available int32) appsv1.DeploymentStatus {
	now := metav1.Now()
	avail := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
		Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now}
	if available == 0 || available < replicas-replicas/4 {
		avail.Status, avail.Reason, avail.Message = corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
	}
	progress := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
		Reason: "NewReplicaSetAvailable", Message: "ReplicaSet has successfully progressed.", LastUpdateTime: now, LastTransitionTime: now}
	if updated != replicas || available != replicas {
		progress.Reason, progress.Message = "ReplicaSetUpdated", "ReplicaSet is progressing."
	}
	return appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: updated,
		ReadyReplicas: available, AvailableReplicas: available, UnavailableReplicas: replicas - available,
		Conditions: []appsv1.DeploymentCondition{avail, progress},
	}
}
