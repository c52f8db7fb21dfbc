package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

func (e *operatorEnv) retentionJob(t *testing.T, ns, name string) *memoryv1alpha1.RetentionJob {
	t.Helper()
	var rj memoryv1alpha1.RetentionJob
	if err := e.get(t, ns, name, &rj); err != nil {
		t.Fatal(err)
	}
	return &rj
}

func (e *operatorEnv) cronJobNames(t *testing.T, ns, rj string) []string {
	t.Helper()
	var list batchv1.CronJobList
	if err := e.c.List(testContext(t), &list, client.InNamespace(ns), client.MatchingLabels{naming.LabelRetentionJob: rj}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cj := range list.Items {
		if cj.DeletionTimestamp.IsZero() {
			names = append(names, cj.Name)
		}
	}
	slices.Sort(names)
	return names
}

// newRetentionJob is a RetentionJob named name of one runtime, the rest
// of its settings the defaults.
func newRetentionJob(ns, name, runtime, schedule string, ops ...memoryv1alpha1.Operation) *memoryv1alpha1.RetentionJob {
	return &memoryv1alpha1.RetentionJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: memoryv1alpha1.RetentionJobSpec{
			RuntimeRef: &memoryv1alpha1.LocalObjectReference{Name: runtime},
			Schedule:   schedule,
			Operations: ops,
		},
	}
}

// nightly is a RetentionJob of runtime "bot" with every setting given.
func nightly(ns string) *memoryv1alpha1.RetentionJob {
	rj := newRetentionJob(ns, "nightly", "bot", "0 3 * * *", "purge", "decay", "expire")
	rj.Spec.TimeZone = ptr.To("Europe/Berlin")
	rj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](5)
	rj.Spec.ActiveDeadlineSeconds = ptr.To[int64](900)
	return rj
}

// scenarioRetentionJob: a RetentionJob becomes one CronJob per target runtime,
// with every setting passed through; selectors follow label changes.
func scenarioRetentionJob(e *operatorEnv, t *testing.T) {
	ns := e.botNamespace(t, "retention")
	rj := nightly(ns)
	mustCreate(t, e.c, rj)
	var cj batchv1.CronJob
	eventually(t, "the CronJob exists", 20*time.Second, func() error { return e.get(t, ns, "nightly-bot", &cj) })
	s := cj.Spec
	c := s.JobTemplate.Spec.Template.Spec.Containers[0]
	wantCmd := []string{"/manager", "job", "--config=/etc/engram/config/config.yaml", "--ops=decay,expire,purge", "--termination-log=/dev/termination-log"}
	if s.Schedule != "0 3 * * *" || *s.TimeZone != "Europe/Berlin" || s.ConcurrencyPolicy != batchv1.ForbidConcurrent ||
		*s.SuccessfulJobsHistoryLimit != 5 || *s.FailedJobsHistoryLimit != 1 || *s.Suspend ||
		*s.JobTemplate.Spec.ActiveDeadlineSeconds != 900 || !slices.Equal(c.Command, wantCmd) || c.Image != testImage ||
		c.Env[0].ValueFrom.SecretKeyRef.Name != "bot-db" {
		t.Errorf("CronJob = %+v\ncommand %v", s, c.Command)
	}
	eventually(t, "the RetentionJob is Scheduled with its next run", 20*time.Second, func() error {
		got := e.retentionJob(t, ns, "nightly")
		c := got.GetCondition(memoryv1alpha1.ConditionScheduled)
		if c == nil || c.Status != metav1.ConditionTrue || got.Status.NextScheduleTime == nil || !slices.Equal(got.Status.CronJobs, []string{"nightly-bot"}) {
			return fmt.Errorf("status = %+v", got.Status)
		}
		want, _ := specs.NextSchedule("0 3 * * *", ptr.To("Europe/Berlin"), time.Now())
		if !got.Status.NextScheduleTime.Time.Equal(want) {
			return fmt.Errorf("nextScheduleTime %s, want %s", got.Status.NextScheduleTime, want)
		}
		return nil
	})

	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) { r.Spec.Suspend = true })
	eventually(t, "suspend reaches the CronJob and clears nextScheduleTime", 20*time.Second, func() error {
		if err := e.get(t, ns, "nightly-bot", &cj); err != nil || !*cj.Spec.Suspend {
			return fmt.Errorf("suspend %v, %v", cj.Spec.Suspend, err)
		}
		if got := e.retentionJob(t, ns, "nightly"); got.Status.NextScheduleTime != nil {
			return fmt.Errorf("nextScheduleTime = %s while suspended", got.Status.NextScheduleTime)
		}
		return nil
	})
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) { r.Spec.Suspend = false })

	// A selector: one CronJob per selected runtime, following label changes.
	// (These runtimes name no existing connection: CronJobs do not need a
	// provisioned tenant, and the test needs no database for them.)
	sel := e.newNamespace(t, "sel")
	for name, tier := range map[string]string{"a": "gold", "b": "gold", "c": "silver"} {
		rt := newRuntime(sel, name, "")
		rt.Spec.Database.ClusterConnection = "nowhere"
		rt.Labels = map[string]string{"tier": tier}
		mustCreate(t, e.c, rt)
	}
	mustCreate(t, e.c, &memoryv1alpha1.RetentionJob{
		ObjectMeta: metav1.ObjectMeta{Name: "sweep", Namespace: sel},
		Spec: memoryv1alpha1.RetentionJobSpec{
			RuntimeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
			Schedule:        "@weekly",
			Operations:      []memoryv1alpha1.Operation{"compact"},
			DryRun:          true,
		},
	})
	waitCronJobs := func(want ...string) {
		t.Helper()
		eventually(t, fmt.Sprintf("CronJobs %v", want), 20*time.Second, func() error {
			if got := e.cronJobNames(t, sel, "sweep"); !slices.Equal(got, want) {
				return fmt.Errorf("CronJobs = %v", got)
			}
			if got := e.retentionJob(t, sel, "sweep").Status.CronJobs; !slices.Equal(got, want) {
				return fmt.Errorf("status.cronJobs = %v", got)
			}
			return nil
		})
	}
	waitCronJobs("sweep-a", "sweep-b")
	if err := e.get(t, sel, "sweep-a", &cj); err != nil || !slices.Contains(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command, "--dry-run") {
		t.Errorf("dry-run CronJob command: %v", err)
	}
	update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: sel}}, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Labels["tier"] = "silver"
	})
	waitCronJobs("sweep-a")
	if err := e.c.Delete(testContext(t), &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: sel}}); err != nil {
		t.Fatal(err)
	}
	waitCronJobs()
	eventually(t, "sweep reports that nothing is selected", 20*time.Second, func() error {
		c := e.retentionJob(t, sel, "sweep").GetCondition(memoryv1alpha1.ConditionScheduled)
		if c == nil || c.Reason != memoryv1alpha1.ReasonNoRuntimesSelected {
			return fmt.Errorf("Scheduled = %+v", c)
		}
		return nil
	})

	// A time zone CEL lets through but no tz database knows.
	mars := newRetentionJob(sel, "mars", "c", "0 3 * * *", "expire")
	mars.Spec.TimeZone = ptr.To("Mars/Olympus_Mons")
	mustCreate(t, e.c, mars)
	eventually(t, "an unknown time zone is reported", 20*time.Second, func() error {
		c := e.retentionJob(t, sel, "mars").GetCondition(memoryv1alpha1.ConditionScheduled)
		if c == nil || c.Reason != memoryv1alpha1.ReasonInvalidSchedule || !strings.Contains(c.Message, "Mars/Olympus_Mons") {
			return fmt.Errorf("Scheduled = %+v", c)
		}
		return nil
	})
}

func (e *operatorEnv) jobsOf(t *testing.T, ns, rj string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := e.c.List(testContext(t), &list, client.InNamespace(ns), client.MatchingLabels{naming.LabelRetentionJob: rj}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// scenarioRunNowAndLastRun: run-now starts exactly one Job per value; a finished
// Job whose pod left a JSON summary fills status.lastRun.
func scenarioRunNowAndLastRun(e *operatorEnv, t *testing.T) {
	ns := e.botNamespace(t, "runnow")
	rj := nightly(ns)
	mustCreate(t, e.c, rj)
	eventually(t, "the CronJob exists", 20*time.Second, func() error { return e.get(t, ns, "nightly-bot", &batchv1.CronJob{}) })
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRunNow, "first")
	})
	jobName := naming.RunNowJobName("nightly-bot", "first")
	eventually(t, "one Job is started", 20*time.Second, func() error {
		jobs := e.jobsOf(t, ns, "nightly")
		if len(jobs) != 1 || jobs[0].Name != jobName {
			return fmt.Errorf("%d Jobs", len(jobs))
		}
		if got := e.retentionJob(t, ns, "nightly").Status.RunNow; got != "first" {
			return fmt.Errorf("status.runNow = %q", got)
		}
		return nil
	})
	job := e.jobsOf(t, ns, "nightly")[0]
	if o := metav1.GetControllerOf(&job); o == nil || o.Kind != "CronJob" || o.Name != "nightly-bot" {
		t.Errorf("Job owner = %+v", o)
	}
	// Reconciling again (any change) must not start another Job for the same value.
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) { metav1.SetMetaDataLabel(&r.ObjectMeta, "touched", "yes") })
	time.Sleep(time.Second)
	if jobs := e.jobsOf(t, ns, "nightly"); len(jobs) != 1 {
		t.Fatalf("%d Jobs after a second reconcile, want 1", len(jobs))
	}

	// Play kubelet and job controller: the pod ends with the summary as its
	// termination message, then the Job completes.
	started := metav1.NewTime(time.Now().Add(-5 * time.Second).Truncate(time.Second))
	finished := metav1.NewTime(time.Now().Truncate(time.Second))
	summary := memory.JobSummary{
		Schema: SchemaFor(newRuntime(ns, "bot", "")), Result: memory.RunSucceeded,
		StartTime: started.Time, CompletionTime: finished.Time,
		Operations: []memory.JobSummaryOp{
			{Name: "decay", Scanned: 120, Affected: 7, Batches: 1, DurationMillis: 40},
			{Name: "expire", Scanned: 113, Affected: 3, Batches: 1, DurationMillis: 12},
			{Name: "purge", Scanned: 10, Affected: 10, Batches: 1, DurationMillis: 8},
		},
	}
	msg, _ := json.Marshal(summary)
	// The job controller's pods carry the template's labels, which the API
	// server completes with the Job's name and uid labels.
	podLabels := map[string]string{}
	for k, v := range job.Spec.Template.Labels {
		podLabels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: jobName + "-x7k2p", Namespace: ns, Labels: podLabels},
		Spec:       *job.Spec.Template.Spec.DeepCopy(),
	}
	mustCreate(t, e.c, pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: naming.ContainerJob, Image: testImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", Message: string(msg), StartedAt: started, FinishedAt: finished,
		}},
	}}}
	if err := e.c.Status().Update(testContext(t), pod); err != nil {
		t.Fatal(err)
	}
	job.Status = batchv1.JobStatus{
		StartTime: &started, CompletionTime: &finished, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: finished},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: finished},
		},
	}
	if err := e.c.Status().Update(testContext(t), &job); err != nil {
		t.Fatal(err)
	}

	eventually(t, "status.lastRun is filled from the termination message", 20*time.Second, func() error {
		st := e.retentionJob(t, ns, "nightly").Status
		r := st.LastRun
		if r == nil {
			return fmt.Errorf("no lastRun: %+v", st)
		}
		want := []memoryv1alpha1.OperationSummary{
			{Name: "decay", Scanned: 120, Affected: 7, DurationMillis: 40},
			{Name: "expire", Scanned: 113, Affected: 3, DurationMillis: 12},
			{Name: "purge", Scanned: 10, Affected: 10, DurationMillis: 8},
		}
		if r.JobName != jobName || r.Runtime != "bot" || r.Result != memoryv1alpha1.RunSucceeded || !slices.Equal(r.Operations, want) ||
			!r.StartTime.Equal(&started) || !r.CompletionTime.Equal(&finished) {
			return fmt.Errorf("lastRun = %+v", r)
		}
		if st.LastSuccessfulTime == nil || !st.LastSuccessfulTime.Equal(&finished) || st.LastScheduleTime == nil || !st.LastScheduleTime.Equal(&started) {
			return fmt.Errorf("times: lastSchedule %v lastSuccessful %v", st.LastScheduleTime, st.LastSuccessfulTime)
		}
		return nil
	})

	// A new value starts a new Job.
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRunNow, "second")
	})
	eventually(t, "a second value starts a second Job", 20*time.Second, func() error {
		var j batchv1.Job
		if err := e.get(t, ns, naming.RunNowJobName("nightly-bot", "second"), &j); err != nil {
			return err
		}
		if n := len(e.jobsOf(t, ns, "nightly")); n != 2 {
			return fmt.Errorf("%d Jobs", n)
		}
		return nil
	})
	var gone batchv1.Job
	if err := e.get(t, ns, "does-not-exist", &gone); !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
