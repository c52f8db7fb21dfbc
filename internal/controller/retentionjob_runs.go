package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// summaryGrace is how long after a Job finished the operator waits for its
// pod's termination message to show up before it reports the run without counts.
const summaryGrace = 30 * time.Second

// observeRuns copies what the CronJobs and their Jobs say into the status:
// last schedule and success times, the newest finished run, the next run.
func (r *RetentionJobReconciler) observeRuns(ctx context.Context, s *retentionScope) (bool, error) {
	rj := s.rj
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(rj.Namespace), client.MatchingLabels{naming.LabelRetentionJob: rj.Name}); err != nil {
		return false, fmt.Errorf("listing Jobs: %w", err)
	}
	// Times only move forward: the CronJobs' history limits delete old Jobs.
	lastSchedule, lastSuccess := rj.Status.LastScheduleTime, rj.Status.LastSuccessfulTime
	for _, cj := range s.cronJobs {
		lastSchedule = later(lastSchedule, cj.Status.LastScheduleTime)
		lastSuccess = later(lastSuccess, cj.Status.LastSuccessfulTime)
	}
	var newest *batchv1.Job
	var newestAt time.Time
	var newestOK bool
	for i := range jobs.Items {
		j := &jobs.Items[i]
		lastSchedule = later(lastSchedule, j.Status.StartTime)
		finished, succeeded, at := jobOutcome(j)
		if !finished {
			continue
		}
		if succeeded {
			lastSuccess = later(lastSuccess, &metav1.Time{Time: at})
		}
		if newest == nil || at.After(newestAt) || (at.Equal(newestAt) && j.Name > newest.Name) {
			newest, newestAt, newestOK = j, at, succeeded
		}
	}
	rj.Status.LastScheduleTime, rj.Status.LastSuccessfulTime = lastSchedule, lastSuccess

	if newest != nil && isNewerRun(rj.Status.LastRun, newest.Name, newestAt) {
		run, wait, err := r.lastRun(ctx, newest, newestAt, newestOK)
		if err != nil {
			return false, err
		}
		if wait > 0 {
			s.requeue.at(wait)
		} else {
			rj.Status.LastRun = run
			if run.Result == memoryv1alpha1.RunFailed {
				r.eventer().warning(rj, "RunFailed", "Run", "Job %s failed: %s", run.JobName, run.Message)
			}
		}
	}

	rj.Status.NextScheduleTime = nil
	if !rj.Spec.Suspend && !s.next.IsZero() && len(s.cronJobs) > 0 {
		rj.Status.NextScheduleTime = &metav1.Time{Time: s.next}
		// Come back when it is due, to move nextScheduleTime on.
		s.requeue.at(time.Until(s.next) + time.Second)
	}
	return false, nil
}

// isNewerRun reports whether the finished Job name (at time at) is a run
// after the one in status.lastRun.
func isNewerRun(last *memoryv1alpha1.LastRun, name string, at time.Time) bool {
	if last == nil {
		return true
	}
	if last.JobName == name {
		return false
	}
	return last.CompletionTime == nil || at.After(last.CompletionTime.Time)
}

// jobOutcome reads a Job's terminal condition.
func jobOutcome(j *batchv1.Job) (finished, succeeded bool, at time.Time) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			at = c.LastTransitionTime.Time
			if j.Status.CompletionTime != nil {
				at = j.Status.CompletionTime.Time
			}
			return true, true, at
		case batchv1.JobFailed:
			return true, false, c.LastTransitionTime.Time
		}
	}
	return false, false, time.Time{}
}

// lastRun builds status.lastRun of a finished Job from its pod's termination
// message (the JSON summary of `manager job`). Without one yet, it asks to
// wait a little (wait > 0); past summaryGrace it reports the run without counts.
func (r *RetentionJobReconciler) lastRun(ctx context.Context, job *batchv1.Job, at time.Time, succeeded bool) (*memoryv1alpha1.LastRun, time.Duration, error) {
	runtime := job.Labels[naming.LabelRuntime]
	message, err := r.terminationMessage(ctx, job)
	if err != nil {
		return nil, 0, err
	}
	if message != "" {
		if summary, err := ParseJobSummary(message); err == nil {
			return LastRunFromSummary(job.Name, runtime, summary, succeeded), 0, nil
		}
	}
	if message == "" && time.Since(at) < summaryGrace {
		return nil, 3 * time.Second, nil
	}
	run := &memoryv1alpha1.LastRun{
		JobName:        job.Name,
		Runtime:        runtime,
		StartTime:      job.Status.StartTime,
		CompletionTime: &metav1.Time{Time: at},
		Result:         resultOf(succeeded),
		Message:        "the run left no job summary (its pod is gone, or it stopped before writing one)",
	}
	if message != "" {
		run.Message = truncate("no job summary; the container's last output: "+message, maxMessage)
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Message != "" {
			run.Message = truncate(c.Reason+": "+c.Message+"; "+run.Message, maxMessage)
		}
	}
	return run, 0, nil
}

// terminationMessage returns the termination message of the job container of
// the Job's newest pod that has one. Pods are read from the API server (not
// cached: the operator would otherwise watch every pod of the cluster), a
// few at a time (visitPods), only when a new run finished, and selected by
// the controller-uid label the API server gives a Job's pods (the Job's
// UID), never by the Job's own selector, which its writer may choose. The
// kubelet bounds a message (4 KiB).
func (r *RetentionJobReconciler) terminationMessage(ctx context.Context, job *batchv1.Job) (string, error) {
	sel := labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(job.UID)})
	var newest *metav1.Time
	message := ""
	err := visitPods(ctx, r.reader, job.Namespace, sel, func(p *corev1.Pod) bool {
		if m := jobContainerMessage(p); m != "" && (newest == nil || newest.Before(&p.CreationTimestamp)) {
			at := p.CreationTimestamp
			newest, message = &at, m
		}
		return true
	})
	if err != nil {
		return "", fmt.Errorf("reading the pods of Job %s: %w", job.Name, err)
	}
	return message, nil
}

// jobContainerMessage is the termination message of p's job container, of
// its current or its last termination ("" when it has none).
func jobContainerMessage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != naming.ContainerJob {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.Message != "" {
				return t.Message
			}
		}
	}
	return ""
}

// later returns the later of two optional times.
func later(a, b *metav1.Time) *metav1.Time {
	switch {
	case b == nil:
		return a
	case a == nil || b.After(a.Time):
		return b
	}
	return a
}
