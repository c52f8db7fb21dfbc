package controller

import (
	"fmt"
	"strings"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// deriveRetentionStatus sets the conditions, status.cronJobs and
// status.observedGeneration of a RetentionJob from what the phases of one
// reconcile recorded in s, and the error that ended it (nil: every phase
// ran, or one stopped on purpose). Like deriveRuntimeStatus, it is the only
// place that sets the conditions.
func deriveRetentionStatus(rj *memoryv1alpha1.RetentionJob, s *retentionScope, err error) {
	if err != nil {
		msg := oneLine(err)
		rj.SetCondition(memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonApplyFailed, msg)
		rj.SetStalled("", "")
		rj.SetReconciling(memoryv1alpha1.ReasonReconcileError, msg)
		return // observedGeneration stays behind: the generation is retried
	}
	rj.MarkObserved()
	if s.applied {
		names := make([]string, 0, len(s.cronJobs))
		for _, cj := range s.cronJobs {
			names = append(names, cj.Name)
		}
		rj.Status.CronJobs = names
	}
	notScheduled, message := s.notScheduled, s.message
	if notScheduled == "" && s.refusedCronJob != nil {
		notScheduled, message = memoryv1alpha1.ReasonObjectNotOwned, s.refusedCronJob.Error()
	}
	if notScheduled != "" {
		rj.SetCondition(memoryv1alpha1.ConditionScheduled, false, notScheduled, message)
		rj.SetCondition(memoryv1alpha1.ConditionReady, false, notScheduled, message)
		setProgress(rj, notScheduled, message)
		return
	}
	msg := fmt.Sprintf("CronJob %s", strings.Join(rj.Status.CronJobs, ", "))
	if rj.Spec.Suspend {
		msg += " (suspended)"
	}
	rj.SetCondition(memoryv1alpha1.ConditionScheduled, true, memoryv1alpha1.ReasonCronJobsReady, msg)
	if s.refusedJob != nil {
		msg := fmt.Sprintf("run-now %q not started: %s", rj.Annotations[naming.AnnotationRunNow], s.refusedJob.Error())
		rj.SetCondition(memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonObjectNotOwned, msg)
		setProgress(rj, memoryv1alpha1.ReasonObjectNotOwned, msg)
		return
	}
	rj.SetCondition(memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonCronJobsReady, msg)
	setProgress(rj, "", "")
}

// progressSetter is an object with the Reconciling and Stalled conditions.
type progressSetter interface {
	SetReconciling(reason, message string)
	SetStalled(reason, message string)
}

// setProgress sets Stalled (reasons that need a human), Reconciling (the
// others: waiting for something that may come) or neither (reason empty).
func setProgress(o progressSetter, reason, message string) {
	switch {
	case reason == "":
		o.SetStalled("", "")
		o.SetReconciling("", "")
	case isStalled(reason):
		o.SetReconciling("", "")
		o.SetStalled(reason, message)
	default:
		o.SetStalled("", "")
		o.SetReconciling(reason, message)
	}
}
