package kubectlengram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// pollInterval is how often --wait reads the objects again.
const pollInterval = time.Second

// ActionResult is what an action did (-o json|yaml).
type ActionResult struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Patch is the merge patch sent (or, with --dry-run, checked by the API server).
	Patch  map[string]any `json:"patch"`
	DryRun bool           `json:"dryRun,omitempty"`
	// Value is the annotation value that identifies this request.
	Value string `json:"value,omitempty"`
	// Runs are the Jobs a run-now started and how they ended (--wait).
	Runs []RunResult `json:"runs,omitempty"`
	// LastRun is the RetentionJob's status.lastRun after --wait.
	LastRun *memoryv1alpha1.LastRun `json:"lastRun,omitempty"`
	Message string                  `json:"message"`
}

// RunResult is one Job of a run-now.
type RunResult struct {
	Job     string `json:"job"`
	Runtime string `json:"runtime,omitempty"`
	Result  string `json:"result"` // Succeeded, Failed
}

// requestValue is a fresh annotation value: the operator acts once per value.
func requestValue() string { return time.Now().UTC().Format("2006-01-02T15-04-05.000000000Z") }

// annotate merges one annotation into an object.
func annotationPatch(key, value string) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}}
}

// patch sends a JSON merge patch, server-side dry run when asked.
func (k *kube) patch(ctx context.Context, obj client.Object, p map[string]any, dryRun bool, resource string) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	opts := []client.PatchOption{client.FieldOwner("kubectl-engram")}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := k.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw), opts...); err != nil {
		return apiError(err, "patch", resource, obj.GetNamespace(), obj.GetName())
	}
	return nil
}

func setPaused(ctx context.Context, a *app, name string, paused bool) error {
	k, rt, err := a.runtime(ctx, name)
	if err != nil {
		return err
	}
	p := map[string]any{"spec": map[string]any{"paused": paused}}
	if err := k.patch(ctx, rt, p, false, resRuntimes); err != nil {
		return err
	}
	msg := "memoryruntime %s/%s resumed: the operator reconciles it again"
	if paused {
		msg = "memoryruntime %s/%s paused: the operator leaves its objects and database as they are (condition Paused)"
	}
	res := ActionResult{Kind: "MemoryRuntime", Namespace: rt.Namespace, Name: rt.Name, Patch: p, Message: fmt.Sprintf(msg, rt.Namespace, rt.Name)}
	return a.printMessage(res)
}

func runRotate(ctx context.Context, a *app, args []string) error {
	k, rt, err := a.runtime(ctx, args[0])
	if err != nil {
		return err
	}
	value := requestValue()
	p := annotationPatch(naming.AnnotationRotateCredentials, value)
	if err := k.patch(ctx, rt, p, false, resRuntimes); err != nil {
		return err
	}
	res := ActionResult{Kind: "MemoryRuntime", Namespace: rt.Namespace, Name: rt.Name, Patch: p, Value: value,
		Message: fmt.Sprintf("asked the operator to rotate the password of memoryruntime %s/%s (%s=%s)", rt.Namespace, rt.Name, naming.AnnotationRotateCredentials, value)}
	if a.wait {
		err := waitFor(ctx, a.waitTimeout, func(ctx context.Context) (bool, error) {
			rt, err := k.getRuntime(ctx, rt.Name)
			return err == nil && rt.Status.RotatedCredentials == value, err
		})
		if err != nil {
			return fmt.Errorf("waiting for the rotation of %s/%s (status.rotatedCredentials=%s): %w", rt.Namespace, rt.Name, value, err)
		}
		res.Message = fmt.Sprintf("rotated the password of memoryruntime %s/%s; its pods roll to the new one", rt.Namespace, rt.Name)
	}
	return a.printMessage(res)
}

func runRunNow(ctx context.Context, a *app, args []string) error {
	k, err := a.kubeClient()
	if err != nil {
		return err
	}
	var rj memoryv1alpha1.RetentionJob
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: args[0]}, &rj); err != nil {
		return apiError(err, "get", resRetentionJobs, k.namespace, args[0])
	}
	value := requestValue()
	p := annotationPatch(naming.AnnotationRunNow, value)
	if err := k.patch(ctx, &rj, p, a.dryRun, resRetentionJobs); err != nil {
		return err
	}
	res := ActionResult{Kind: "RetentionJob", Namespace: rj.Namespace, Name: rj.Name, Patch: p, Value: value, DryRun: a.dryRun}
	switch {
	case a.dryRun:
		res.Message = fmt.Sprintf("dry run: the API server accepts %s=%s on retentionjob %s/%s; nothing was started (a run that changes nothing: set spec.dryRun)", naming.AnnotationRunNow, value, rj.Namespace, rj.Name)
	case a.wait:
		if err := waitRunNow(ctx, a, k, &rj, value, &res); err != nil {
			return err
		}
	default:
		res.Message = fmt.Sprintf("started a run of retentionjob %s/%s (%s=%s); follow it with --wait or kubectl engram status", rj.Namespace, rj.Name, naming.AnnotationRunNow, value)
	}
	if err := a.printData(res, func(w io.Writer) error { return printRunNow(w, &res) }); err != nil {
		return err
	}
	for _, r := range res.Runs {
		if r.Result != string(memoryv1alpha1.RunSucceeded) {
			return fmt.Errorf("run %s of retentionjob %s/%s %s", r.Job, rj.Namespace, rj.Name, r.Result)
		}
	}
	return nil
}

// waitRunNow follows a run-now: the operator takes the value
// (status.runNow), starts one Job per CronJob, the Jobs finish, and the
// RetentionJob's lastRun summarises the newest.
func waitRunNow(ctx context.Context, a *app, k *kube, rj *memoryv1alpha1.RetentionJob, value string, res *ActionResult) error {
	key := client.ObjectKeyFromObject(rj)
	err := waitFor(ctx, a.waitTimeout, func(ctx context.Context) (bool, error) {
		if err := k.c.Get(ctx, key, rj); err != nil {
			return false, apiError(err, "get", resRetentionJobs, key.Namespace, key.Name)
		}
		return rj.Status.RunNow == value, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the operator to take run-now %s of %s/%s: %w", value, key.Namespace, key.Name, err)
	}
	if len(rj.Status.CronJobs) == 0 {
		return fmt.Errorf("retentionjob %s/%s has no CronJob, so nothing ran: %s", key.Namespace, key.Name, readyText(rj))
	}
	jobs := map[string]string{} // Job name -> result
	err = waitFor(ctx, a.waitTimeout, func(ctx context.Context) (bool, error) {
		done := true
		for _, cj := range rj.Status.CronJobs {
			name := naming.RunNowJobName(cj, value)
			var job batchv1.Job
			if err := k.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, &job); err != nil {
				if isForbidden(apiError(err, "get", resJobs, key.Namespace, name)) {
					return false, apiError(err, "get", resJobs, key.Namespace, name)
				}
				done = false
				continue
			}
			jobs[name] = jobResult(&job)
			res.Runs = upsertRun(res.Runs, RunResult{Job: name, Runtime: job.Labels[naming.LabelRuntime], Result: jobs[name]})
			done = done && jobs[name] != ""
		}
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Jobs of run-now %s: %w", value, err)
	}
	// The operator writes lastRun from the finished Job's summary.
	_ = waitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := k.c.Get(ctx, key, rj); err != nil {
			return false, nil //nolint:nilerr // a failed read is polled again until the wait's timeout (lastRun is best effort)
		}
		_, ours := jobs[lastRunJob(rj)]
		return ours, nil
	})
	if _, ours := jobs[lastRunJob(rj)]; ours {
		res.LastRun = rj.Status.LastRun
	}
	res.Message = fmt.Sprintf("run-now %s of retentionjob %s/%s finished", value, key.Namespace, key.Name)
	return nil
}

func lastRunJob(rj *memoryv1alpha1.RetentionJob) string {
	if rj.Status.LastRun == nil {
		return ""
	}
	return rj.Status.LastRun.JobName
}

// jobResult is Succeeded or Failed for a finished Job, "" while it runs.
func jobResult(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return string(memoryv1alpha1.RunSucceeded)
		case batchv1.JobFailed:
			return string(memoryv1alpha1.RunFailed)
		}
	}
	return ""
}

func upsertRun(runs []RunResult, r RunResult) []RunResult {
	for i := range runs {
		if runs[i].Job == r.Job {
			runs[i] = r
			return runs
		}
	}
	return append(runs, r)
}

func readyText(rj *memoryv1alpha1.RetentionJob) string {
	if c := rj.GetCondition(memoryv1alpha1.ConditionReady); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "the operator has not reported on it"
}

func printRunNow(w io.Writer, res *ActionResult) error {
	fmt.Fprintln(w, res.Message)
	for _, r := range res.Runs {
		fmt.Fprintf(w, "  Job %s (runtime %s): %s\n", r.Job, orDash(r.Runtime), orDash(r.Result))
	}
	if lr := res.LastRun; lr != nil {
		for _, op := range lr.Operations {
			fmt.Fprintf(w, "  %-8s scanned %d, affected %d, %dms\n", op.Name, op.Scanned, op.Affected, op.DurationMillis)
		}
		if lr.Message != "" {
			fmt.Fprintf(w, "  message: %s\n", lr.Message)
		}
	}
	return nil
}

// waitFor polls cond every pollInterval until it is true, fails, or
// timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, cond)
}
