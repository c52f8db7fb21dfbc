package localpod

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// markAvailable reports the Deployment's one local replica as available,
// as the deployment controller would once the pod is ready; it writes only
// when the status says otherwise.
func (k *Kubelet) markAvailable(ctx context.Context, d *appsv1.Deployment, p *process) error {
	if !p.alive() {
		return nil
	}
	if RolledOut(d, 1) {
		return nil
	}
	d.Status = AvailableStatus(d, 1)
	return k.Client.Status().Update(ctx, d)
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobTimeout bounds one local job run when the Job sets no deadline.
const jobTimeout = 10 * time.Minute

// runJob runs the Job's container to completion, then records what the
// kubelet and the job controller would: a Pod whose container terminated
// with the termination message, and the Job's completion status.
func (k *Kubelet) runJob(ctx context.Context, j *batchv1.Job) error {
	key := j.Namespace + "/" + j.Name
	started := metav1.NewTime(time.Now().Truncate(time.Second))
	pod := newPodSpec(j.Namespace, j.Name, &j.Spec.Template)
	p, err := k.start(ctx, pod, filepath.Join(k.Dir, "jobs", j.Namespace, j.Name))
	if err != nil {
		return err
	}
	k.Log.Info("running", "job", key, "pid", p.cmd.Process.Pid)
	timeout := jobTimeout
	if d := j.Spec.ActiveDeadlineSeconds; d != nil {
		timeout = time.Duration(*d) * time.Second
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.stop()
	case <-ctx.Done():
		p.stop()
		return ctx.Err()
	}
	finishedAt := metav1.NewTime(time.Now().Truncate(time.Second))
	if !finishedAt.After(started.Time) {
		finishedAt = metav1.NewTime(started.Add(time.Second))
	}
	exit := p.cmd.ProcessState.ExitCode()
	msg := terminationMessage(p, j.Spec.Template.Spec.Containers[0].TerminationMessagePolicy)
	if err := k.recordPod(ctx, j, exit, msg, started, finishedAt); err != nil {
		return fmt.Errorf("recording the pod of %s: %w", key, err)
	}
	k.Log.Info("finished", "job", key, "exitCode", exit)
	return k.recordJob(ctx, j, exit == 0, started, finishedAt)
}

// terminationMessage reads the termination log like the kubelet: the file,
// or with FallbackToLogsOnError and an empty file, the end of the log.
func terminationMessage(p *process, policy corev1.TerminationMessagePolicy) string {
	const limit = 4096
	b, _ := os.ReadFile(p.termLog)
	if len(bytes.TrimSpace(b)) == 0 && policy == corev1.TerminationMessageFallbackToLogsOnError && p.cmd.ProcessState.ExitCode() != 0 {
		b, _ = os.ReadFile(p.logPath)
		if len(b) > limit {
			b = b[len(b)-limit:]
		}
	}
	if len(b) > limit {
		b = b[:limit]
	}
	return string(b)
}

func (k *Kubelet) recordPod(ctx context.Context, j *batchv1.Job, exit int, msg string, started, finishedAt metav1.Time) error {
	labels := map[string]string{}
	for key, v := range j.Spec.Template.Labels {
		labels[key] = v
	}
	labels[batchv1.JobNameLabel] = j.Name
	labels["job-name"] = j.Name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-local", Namespace: j.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *j.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "localpod"
	if err := k.Client.Create(ctx, pod); err != nil {
		return err
	}
	phase, reason := corev1.PodSucceeded, "Completed"
	if exit != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	c := j.Spec.Template.Spec.Containers[0]
	pod.Status = corev1.PodStatus{Phase: phase, StartTime: &started, ContainerStatuses: []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, ImageID: "localpod://" + k.Binary,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(exit), Reason: reason, Message: msg, StartedAt: started, FinishedAt: finishedAt,
		}},
	}}}
	return k.Client.Status().Update(ctx, pod)
}

func (k *Kubelet) recordJob(ctx context.Context, j *batchv1.Job, ok bool, started, finishedAt metav1.Time) error {
	st := batchv1.JobStatus{StartTime: &started}
	if ok {
		st.Succeeded, st.CompletionTime = 1, &finishedAt
		st.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastProbeTime: finishedAt, LastTransitionTime: finishedAt},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastProbeTime: finishedAt, LastTransitionTime: finishedAt},
		}
	} else {
		st.Failed = 1
		st.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastProbeTime: finishedAt, LastTransitionTime: finishedAt},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastProbeTime: finishedAt, LastTransitionTime: finishedAt},
		}
	}
	j.Status = st
	return k.Client.Status().Update(ctx, j)
}
