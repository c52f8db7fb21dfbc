package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// testRetention: a RetentionJob's CronJob makes the real CronJob controller
// create a Job on schedule, whose Pod runs `manager job` and writes its
// summary to its termination message; the operator copies it into
// status.lastRun. The run-now annotation starts a run at once.
func (e *env) testRetention(t *testing.T) {
	ctx := scenarioCtx(t, 6*time.Minute)
	ns := e.samplesNS
	e.ensureSamples(t)

	// On schedule: every minute, so the first run comes within a minute.
	rj := &memoryv1alpha1.RetentionJob{
		ObjectMeta: metav1.ObjectMeta{Name: "every-minute", Namespace: ns},
		Spec: memoryv1alpha1.RetentionJobSpec{
			RuntimeRef: &memoryv1alpha1.LocalObjectReference{Name: sampleRuntime},
			Schedule:   "* * * * *",
			Operations: []memoryv1alpha1.Operation{memoryv1alpha1.OperationDecay, memoryv1alpha1.OperationExpire},
		},
	}
	if err := e.cl.c.Create(ctx, rj); err != nil {
		t.Fatal(err)
	}
	lr := e.waitLastRun(t, ctx, rj, func(lr *memoryv1alpha1.LastRun) bool { return true })
	e.checkJobPod(t, ctx, ns, lr.JobName)
	if err := e.cl.c.Delete(ctx, rj); err != nil {
		t.Fatal(err)
	}

	// run-now on the samples' nightly job (scheduled at 03:00).
	nightly := &memoryv1alpha1.RetentionJob{}
	if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nightly"}, nightly); err != nil {
		t.Fatal(err)
	}
	value := "e2e-" + randomHex(3)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, naming.AnnotationRunNow, value)
	annotated := time.Now().Truncate(time.Second)
	if err := e.cl.c.Patch(ctx, nightly, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	lr = e.waitLastRun(t, ctx, nightly, func(lr *memoryv1alpha1.LastRun) bool {
		return nightly.Status.RunNow == value && !lr.CompletionTime.Time.Before(annotated)
	})
	e.checkJobPod(t, ctx, ns, lr.JobName)
}

// waitLastRun waits for a completed status.lastRun that ok accepts and
// checks that it succeeded and counted something.
func (e *env) waitLastRun(t *testing.T, ctx context.Context, rj *memoryv1alpha1.RetentionJob, ok func(*memoryv1alpha1.LastRun) bool) *memoryv1alpha1.LastRun {
	t.Helper()
	start := time.Now()
	err := poll(ctx, time.Second, func() (bool, error) {
		if err := e.cl.c.Get(ctx, client.ObjectKeyFromObject(rj), rj); err != nil {
			return false, err
		}
		lr := rj.Status.LastRun
		return lr != nil && lr.CompletionTime != nil && ok(lr), nil
	})
	if err != nil {
		t.Fatalf("retentionjob %s: no completed run: %v (status %+v)\n%s", rj.Name, err, rj.Status, e.cl.describePods(rj.Namespace))
	}
	lr := rj.Status.LastRun
	t.Logf("retentionjob %s: job %s %s after %s, operations %+v", rj.Name, lr.JobName, lr.Result, time.Since(start).Round(time.Second), lr.Operations)
	if lr.Result != memoryv1alpha1.RunSucceeded || len(lr.Operations) == 0 {
		t.Errorf("retentionjob %s: last run %+v, want Succeeded with operations", rj.Name, lr)
	}
	return lr
}

// checkJobPod: the Job of the run ran `manager job` in a Pod that
// completed, and its termination message is the JSON summary.
func (e *env) checkJobPod(t *testing.T, ctx context.Context, ns, jobName string) {
	t.Helper()
	var job batchv1.Job
	if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, &job); err != nil {
		t.Errorf("the run's Job %s: %v", jobName, err)
		return
	}
	if job.Status.Succeeded != 1 {
		t.Errorf("Job %s: %d succeeded Pods", jobName, job.Status.Succeeded)
	}
	var pods corev1.PodList
	if err := e.cl.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: jobName}); err != nil || len(pods.Items) == 0 {
		t.Errorf("the Pods of Job %s: %v (%d)", jobName, err, len(pods.Items))
		return
	}
	p := pods.Items[0]
	c := p.Spec.Containers[0]
	if !slices.Contains(append(c.Command, c.Args...), "job") || c.Image != image {
		t.Errorf("Pod %s runs %v %v in %s, want `manager job` in %s", p.Name, c.Command, c.Args, c.Image, image)
	}
	st := p.Status.ContainerStatuses
	if len(st) == 0 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 {
		t.Errorf("Pod %s: container state %+v, want terminated with exit 0", p.Name, st)
		return
	}
	var summary map[string]any
	if err := json.Unmarshal([]byte(st[0].State.Terminated.Message), &summary); err != nil {
		t.Errorf("Pod %s: termination message %q is not the JSON summary: %v", p.Name, st[0].State.Terminated.Message, err)
	}
}
