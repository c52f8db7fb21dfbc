package controller

import (
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// TestDeriveRetentionStatus: Ready/Scheduled, Reconciling and Stalled of a
// RetentionJob from what its phases recorded.
func TestDeriveRetentionStatus(t *testing.T) {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly-bot"}}
	refused := &notOwnedError{kind: "Job", name: "nightly-bot-x"}
	cases := []struct {
		name                 string
		s                    retentionScope
		err                  error
		ready, reason        string
		reconciling, stalled string
		observed             bool
	}{
		{"scheduled", retentionScope{cronJobs: []*batchv1.CronJob{cj}, applied: true}, nil, "True", "CronJobsReady", "", "", true},
		{"runtime not found: waits", retentionScope{applied: true, notScheduled: "RuntimeNotFound", message: "no bot"}, nil, "False", "RuntimeNotFound", "RuntimeNotFound", "", true},
		{"invalid schedule: stalled", retentionScope{notScheduled: "InvalidSchedule", message: "bad"}, nil, "False", "InvalidSchedule", "", "InvalidSchedule", true},
		{"foreign run-now Job: stalled", retentionScope{cronJobs: []*batchv1.CronJob{cj}, applied: true, refusedJob: refused}, nil, "False", "ObjectNotOwned", "", "ObjectNotOwned", true},
		{"API error: retried", retentionScope{}, errors.New("etcd timeout"), "False", "ApplyFailed", "ReconcileError", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rj := testRetentionJob()
			rj.Generation = 4
			s := c.s
			s.rj = rj
			deriveRetentionStatus(rj, &s, c.err)
			ready := rj.GetCondition(memoryv1alpha1.ConditionReady)
			trueReason := func(cond string) string {
				if x := rj.GetCondition(cond); x != nil && x.Status == metav1.ConditionTrue {
					return x.Reason
				}
				return ""
			}
			if string(ready.Status) != c.ready || ready.Reason != c.reason ||
				trueReason(memoryv1alpha1.ConditionReconciling) != c.reconciling || trueReason(memoryv1alpha1.ConditionStalled) != c.stalled ||
				(rj.Status.ObservedGeneration == 4) != c.observed {
				t.Errorf("conditions %+v observedGeneration %d", rj.Status.Conditions, rj.Status.ObservedGeneration)
			}
		})
	}
}

// TestDerivePolicyStatus: an invalid policy is Stalled (kstatus Failed) and
// a valid one is not.
func TestDerivePolicyStatus(t *testing.T) {
	p := &memoryv1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	derivePolicyStatus(p, policyFacts{problem: "redaction.patterns[0]: bad"})
	if c := p.GetCondition(memoryv1alpha1.ConditionStalled); c == nil || c.Reason != memoryv1alpha1.ReasonInvalid || p.IsValid() || p.Status.ObservedGeneration != 3 {
		t.Errorf("invalid: %+v", p.Status)
	}
	p.Generation = 4
	derivePolicyStatus(p, policyFacts{categories: 2})
	if p.GetCondition(memoryv1alpha1.ConditionStalled) != nil || !p.IsValid() || p.Status.ObservedGeneration != 4 {
		t.Errorf("valid: %+v", p.Status)
	}
	p.Generation = 5
	derivePolicyStatus(p, policyFacts{categories: 2, err: errors.New("listing runtimes")})
	if p.Status.ObservedGeneration != 4 {
		t.Errorf("a failed reconcile moved observedGeneration to %d", p.Status.ObservedGeneration)
	}
}
