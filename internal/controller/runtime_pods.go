package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// podCheckInterval is how often a runtime whose memory service is not
// rolled out looks at its Pods again: a container that the kernel
// OOM-kills, or that crash-loops, changes no field of the Deployment, so
// no watch event would bring the reconcile back.
const podCheckInterval = 15 * time.Second

// waitingTrouble are the waiting reasons of a container that will not
// start by itself; a user has to change something.
var waitingTrouble = []string{"CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "CreateContainerConfigError", "InvalidImageName"}

// podTrouble reads the runtime's service Pods (uncached, like the job Pods:
// the operator does not watch Pods, and a few at a time: visitPods) and
// describes why they do not serve: the first Pod, in name order, that has
// trouble.
func (r *MemoryRuntimeReconciler) podTrouble(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime) (string, error) {
	msg := ""
	sel := labels.SelectorFromSet(naming.SelectorLabels(rt.Name))
	err := visitPods(ctx, r.reader, rt.Namespace, sel, func(p *corev1.Pod) bool {
		msg = describePodTrouble(rt, []corev1.Pod{*p})
		return msg == ""
	})
	if err != nil {
		return "", fmt.Errorf("reading the memory service pods: %w", err)
	}
	return msg, nil
}

// describePodTrouble names the first Pod (by name, so the text stays the
// same from one reconcile to the next and the status is not rewritten)
// that no node will take, or whose service container was OOM-killed or
// waits for a reason it cannot leave by itself; "" when there is none.
// Restart counts and the kubelet's back-off messages are left out on
// purpose: they change on every crash.
func describePodTrouble(rt *memoryv1alpha1.MemoryRuntime, pods []corev1.Pod) string {
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if msg, ok := unschedulable(&p); ok {
			return fmt.Sprintf("pod %s cannot be scheduled: %s (check spec.service.nodeSelector, tolerations, affinity, topologySpreadConstraints, priorityClassName and resources)", p.Name, msg)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != naming.ContainerSvc {
				continue
			}
			if oomKilled(cs) {
				limit := "none"
				if l, ok := rt.Spec.Service.Resources.Limits[corev1.ResourceMemory]; ok {
					limit = l.String()
				}
				return fmt.Sprintf("pod %s: the memory service was OOMKilled (memory limit %s): raise spec.service.resources.limits.memory", p.Name, limit)
			}
			if w := cs.State.Waiting; w != nil && slices.Contains(waitingTrouble, w.Reason) {
				return fmt.Sprintf("pod %s: the memory service container is waiting: %s (kubectl describe pod -n %s %s)", p.Name, w.Reason, p.Namespace, p.Name)
			}
		}
	}
	return ""
}

func oomKilled(cs corev1.ContainerStatus) bool {
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && t.Reason == "OOMKilled" {
			return true
		}
	}
	return false
}

// unschedulable reports the scheduler's message for a Pod no node can take
// (PodScheduled False, reason Unschedulable). The message counts nodes
// and names the predicates that failed; it changes only when the cluster
// does, not on every scheduling attempt.
func unschedulable(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return strings.TrimSpace(c.Message), true
		}
	}
	return "", false
}
