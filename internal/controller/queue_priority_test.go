package controller

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// TestQueuePriority pins which reconciles put their runtime ahead of the
// runtimes not begun: only one that leaves it waiting for its first
// available replica with nothing wrong (queue_priority.go).
func TestQueuePriority(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{} // one replica by default
	none := deployment(1, 1, 1, 0, 0)
	serving := deployment(1, 1, 1, 1, 1)
	rolling := deployment(2, 2, 1, 0, 1) // a new template, the old replica still serves
	old := deployment(1, 1, 1, 0, 0)
	old.CreationTimestamp = metav1.NewTime(time.Now().Add(-finishingWindow - time.Minute))
	cases := []struct {
		name  string
		facts runtimeFacts
		want  int
	}{
		{"deployed, no replica available yet", runtimeFacts{deploy: none}, priorityFinishing},
		{"serving", runtimeFacts{deploy: serving}, priorityNormal},
		{"rolling out over a serving replica", runtimeFacts{deploy: rolling}, priorityNormal},
		{"a Pod reports trouble", runtimeFacts{deploy: none, podTrouble: "CrashLoopBackOff"}, priorityNormal},
		{"a phase failed", runtimeFacts{deploy: none, err: errors.New("boom")}, priorityNormal},
		{"blocked", runtimeFacts{deploy: none, blocked: &blocker{cond: memoryv1alpha1.ConditionReady, reason: memoryv1alpha1.ReasonPolicyNotFound}}, priorityNormal},
		{"not as far as the Deployment", runtimeFacts{}, priorityNormal},
		{"deleting", runtimeFacts{deleting: true, deploy: none}, priorityNormal},
		{"paused", runtimeFacts{paused: true, deploy: none}, priorityNormal},
		{"no replica long after its Deployment was created", runtimeFacts{deploy: old}, priorityNormal},
	}
	for _, c := range cases {
		if got := queuePriority(rt, c.facts); got != c.want {
			t.Errorf("%s: priority %d, want %d", c.name, got, c.want)
		}
	}
}

// TestObservedDBReady: what this process last wrote wins over a cache that
// has not seen it yet; a restarted process (nothing remembered) reads the cache.
func TestObservedDBReady(t *testing.T) {
	withCond := func(st metav1.ConditionStatus) *memoryv1alpha1.MemoryRuntime {
		rt := &memoryv1alpha1.MemoryRuntime{}
		rt.Status.Conditions = []metav1.Condition{{Type: memoryv1alpha1.ConditionDatabaseReady, Status: st}}
		return rt
	}
	cases := []struct {
		name string
		rt   *memoryv1alpha1.MemoryRuntime
		mem  runtimeState
		want bool
	}{
		{"cache without the condition, True written", &memoryv1alpha1.MemoryRuntime{}, runtimeState{dbReady: metav1.ConditionTrue}, true},
		{"cache says False, True written since", withCond(metav1.ConditionFalse), runtimeState{dbReady: metav1.ConditionTrue}, true},
		{"cache says True, False written since", withCond(metav1.ConditionTrue), runtimeState{dbReady: metav1.ConditionFalse}, false},
		{"restarted: the cache says True", withCond(metav1.ConditionTrue), runtimeState{}, true},
		{"restarted: no condition", &memoryv1alpha1.MemoryRuntime{}, runtimeState{}, false},
	}
	for _, c := range cases {
		if got := observedDBReady(c.rt, c.mem); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
