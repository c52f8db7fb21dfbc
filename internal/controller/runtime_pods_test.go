package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// TestPodTroubleOOMKilled: a service container the kernel OOM-killed (now
// or on its last run) is named in the status with the limit to raise; a
// container waiting in CrashLoopBackOff or on an image it cannot pull is
// named with its reason; healthy or terminating Pods say nothing, and the
// text does not change from one crash to the next.
func TestPodTroubleOOMKilled(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "tight", Namespace: "team-a"}}
	rt.Spec.Service.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("12Mi")}
	pod := func(name string, cs corev1.ContainerStatus) corev1.Pod {
		cs.Name = naming.ContainerSvc
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
	}
	oom := corev1.ContainerStatus{RestartCount: 2, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}},
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}}}
	oomLater := oom
	oomLater.RestartCount = 5
	oomLater.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 2m40s restarting failed container"}
	crash := corev1.ContainerStatus{LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}},
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	healthy := corev1.ContainerStatus{Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	gone := pod("tight-a", oom)
	gone.DeletionTimestamp = &metav1.Time{}

	cases := []struct {
		name string
		pods []corev1.Pod
		want []string // substrings; none: ""
	}{
		{"OOMKilled", []corev1.Pod{pod("tight-b", healthy), pod("tight-c", oom)}, []string{"pod tight-c", "OOMKilled", "memory limit 12Mi", "spec.service.resources.limits.memory"}},
		{"CrashLoopBackOff", []corev1.Pod{pod("tight-c", crash)}, []string{"pod tight-c", "waiting: CrashLoopBackOff"}},
		{"image never pulled", []corev1.Pod{pod("tight-c", corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}})}, []string{"ErrImageNeverPull"}},
		{"healthy", []corev1.Pod{pod("tight-b", healthy)}, nil},
		{"terminating", []corev1.Pod{gone}, nil},
	}
	for _, c := range cases {
		got := describePodTrouble(rt, c.pods)
		if len(c.want) == 0 && got != "" {
			t.Errorf("%s: %q, want nothing", c.name, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
	if a, b := describePodTrouble(rt, []corev1.Pod{pod("tight-c", oom)}), describePodTrouble(rt, []corev1.Pod{pod("tight-c", oomLater)}); a != b {
		t.Errorf("the text changes from one crash to the next (%q, %q): every crash would rewrite the status", a, b)
	}
}

// TestPodTroubleUnschedulable: a service Pod the scheduler cannot place
// (a nodeSelector no node matches, say) is named in the status with the
// scheduler's reason and the fields that decide where Pods go; a Pod
// merely waiting for its first scheduling attempt says nothing.
func TestPodTroubleUnschedulable(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "placed", Namespace: "team-a"}}
	pending := func(name string, cond corev1.PodCondition) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{cond}}}
	}
	msg := "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
	stuck := pending("placed-a", corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg})
	got := describePodTrouble(rt, []corev1.Pod{stuck})
	for _, w := range []string{"pod placed-a cannot be scheduled", msg, "spec.service.nodeSelector"} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
	fresh := pending("placed-b", corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulerError"})
	if got := describePodTrouble(rt, []corev1.Pod{fresh}); got != "" {
		t.Errorf("a Pod not (yet) unschedulable: %q, want nothing", got)
	}
}
