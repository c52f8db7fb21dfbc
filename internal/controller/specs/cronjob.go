package specs

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// CronJob is the CronJob of retention job rj for one target runtime: it runs
// `manager job` with the runtime's credentials and config.
func CronJob(rj *memoryv1alpha1.RetentionJob, rt *memoryv1alpha1.MemoryRuntime, image string) *batchv1.CronJob {
	labels := naming.JobLabels(rj.Name, rt.Name)
	return &batchv1.CronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            naming.CronJobName(rj.Name, rt.Name),
			Namespace:       rj.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rj, memoryv1alpha1.GroupVersion.WithKind("RetentionJob"))},
		},
		Spec: batchv1.CronJobSpec{
			Schedule:                   rj.Spec.Schedule,
			TimeZone:                   rj.Spec.TimeZone,
			ConcurrencyPolicy:          batchv1.ConcurrencyPolicy(rj.ConcurrencyPolicyOrDefault()),
			Suspend:                    ptr.To(rj.Spec.Suspend),
			SuccessfulJobsHistoryLimit: ptr.To(ptr.Deref(rj.Spec.SuccessfulJobsHistoryLimit, 3)),
			FailedJobsHistoryLimit:     ptr.To(ptr.Deref(rj.Spec.FailedJobsHistoryLimit, 1)),
			StartingDeadlineSeconds:    ptr.To(StartingDeadlineSeconds(rj)),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       jobSpec(rj, rt, image, labels),
			},
		},
	}
}

// jobSpec is one maintenance run. It is not retried within a run
// (backoffLimit 0): the next scheduled run is the retry, and one run keeps
// one pod whose termination message is the run's summary.
func jobSpec(rj *memoryv1alpha1.RetentionJob, rt *memoryv1alpha1.MemoryRuntime, image string, labels map[string]string) batchv1.JobSpec {
	spec := batchv1.JobSpec{
		BackoffLimit:          ptr.To[int32](0),
		ActiveDeadlineSeconds: ptr.To(ptr.Deref(rj.Spec.ActiveDeadlineSeconds, DefaultJobActiveDeadlineSeconds)),
		Template:              jobPod(rt, image, labels, JobCommand(rj), JobResources(rj), append(append(tenantEnv(currentEmbedderView(rt)), reembedJobEnv(rt)...), exportEnv(rj)...)),
	}
	withExportVolume(rj, &spec.Template.Spec)
	return spec
}

// currentEmbedderView is rt with, while a re-embed fills, the key of the
// recorded embedder (status.embeddingAccess) as spec.embedding's: the
// config a run reads names that embedder, not the spec's next one, whose
// key would go to the wrong provider (review 13b). No record: no key.
func currentEmbedderView(rt *memoryv1alpha1.MemoryRuntime) *memoryv1alpha1.MemoryRuntime {
	re, have := rt.Status.Reembed, rt.Status.Embedding
	if re == nil || have == nil || (re.Phase != memoryv1alpha1.ReembedFilling && re.Phase != memoryv1alpha1.ReembedPaused) {
		return rt
	}
	view := rt.DeepCopy()
	view.Spec.Embedding.APIKeySecretRef = nil
	if acc := rt.Status.EmbeddingAccess; acc != nil && acc.RuntimeEmbedder == *have {
		view.Spec.Embedding.APIKeySecretRef = acc.APIKeySecretRef.DeepCopy()
	}
	return view
}

// reembedJobEnv is a maintenance run's key of the next embedder while a
// re-embed fills (status.reembed Filling or Paused): the config it reads
// names that embedder as reembed.next, so its compaction summaries and
// episodes are dual-written as the service's writes are.
func reembedJobEnv(rt *memoryv1alpha1.MemoryRuntime) []corev1.EnvVar {
	re := rt.Status.Reembed
	if re == nil || (re.Phase != memoryv1alpha1.ReembedFilling && re.Phase != memoryv1alpha1.ReembedPaused) {
		return nil
	}
	return ReembedKeyEnv(rt.Spec.Embedding.APIKeySecretRef)
}

// jobPod is the pod of every Job the operator runs for a tenant (the
// RetentionJobs' runs and the re-embed): one job container of the
// service's image, the tenant's config mounted, nothing of the
// Kubernetes API, the runtime's scheduling.
func jobPod(rt *memoryv1alpha1.MemoryRuntime, image string, labels map[string]string, cmd []string,
	res corev1.ResourceRequirements, env []corev1.EnvVar) corev1.PodTemplateSpec {
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext:              podSecurityContext(),
			Containers: []corev1.Container{{
				Name:                     naming.ContainerJob,
				Image:                    image,
				Command:                  cmd,
				Resources:                withEphemeralStorage(res),
				Env:                      env,
				SecurityContext:          containerSecurityContext(),
				TerminationMessagePath:   naming.TerminationLogPath,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				VolumeMounts:             []corev1.VolumeMount{mount(volumeConfig, naming.ConfigDir), mount(volumeTmp, "/tmp")},
			}},
			Volumes: []corev1.Volume{configVolume(rt), tmpVolume()},
		},
	}
	jobScheduling(rt, &pod.Spec)
	return pod
}

// JobCommand is the job container's command: the operations in canonical order.
func JobCommand(rj *memoryv1alpha1.RetentionJob) []string {
	ops := rj.SortedOperations()
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = string(op)
	}
	cmd := []string{
		naming.BinaryPath, "job",
		"--config=" + naming.ConfigPath,
		"--ops=" + strings.Join(names, ","),
		"--termination-log=" + naming.TerminationLogPath,
	}
	if rj.Spec.DryRun {
		cmd = append(cmd, "--dry-run")
	}
	return append(append(cmd, pacingArgs(rj.Spec.Pacing)...), exportArgs(rj)...)
}

// RunNowJob is the Job a run-now annotation starts: the CronJob's job
// template, owned by the CronJob (as `kubectl create job --from=cronjob/...`
// does), so the CronJob's history limits and deletion cover it too.
func RunNowJob(cj *batchv1.CronJob, value string) *batchv1.Job {
	labels := make(map[string]string, len(cj.Spec.JobTemplate.Labels))
	for k, v := range cj.Spec.JobTemplate.Labels {
		labels[k] = v
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      naming.RunNowJobName(cj.Name, value),
			Namespace: cj.Namespace,
			Labels:    labels,
			Annotations: map[string]string{
				naming.AnnotationInstantiate: "manual",
				naming.AnnotationRunNow:      value,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
}

// DefaultJobActiveDeadlineSeconds ends a maintenance run that takes over an
// hour (a hung database, say); the next scheduled run is the retry.
const DefaultJobActiveDeadlineSeconds int64 = 3600

// JobResources are the job container's resources: the RetentionJob's, or
// a default sized for bounded batches (requests so the scheduler counts the
// pod, a memory limit so a runaway run cannot starve its node; no CPU limit,
// which would only slow the batches that hold locks).
func JobResources(rj *memoryv1alpha1.RetentionJob) corev1.ResourceRequirements {
	if rj.Spec.Resources != nil {
		return *rj.Spec.Resources.DeepCopy()
	}
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
}

// StartingDeadlineSeconds is the CronJob's startingDeadlineSeconds:
// spec.startingDeadlineSeconds, else the shortest time between two runs of
// the schedule. Without a deadline the CronJob controller counts every run
// missed since the last one and, past 100 (a minutely schedule while the
// control plane was down for two hours), stops scheduling the CronJob for
// good; with it, only the runs within the deadline count, at most two
// here. A run that could not start on time still starts late, unless the
// next one is due by then.
func StartingDeadlineSeconds(rj *memoryv1alpha1.RetentionJob) int64 {
	if d := rj.Spec.StartingDeadlineSeconds; d != nil {
		return *d
	}
	gap, err := ShortestInterval(rj.Spec.Schedule, rj.Spec.TimeZone)
	if err != nil {
		// The controller refuses such a schedule before building a
		// CronJob (InvalidSchedule); a value for completeness.
		return DefaultStartingDeadlineSeconds
	}
	return int64(gap.Seconds())
}

// DefaultStartingDeadlineSeconds is the deadline of a schedule whose
// interval cannot be computed.
const DefaultStartingDeadlineSeconds int64 = 3600

// pacingArgs are `manager job`'s pacing flags from spec.pacing (none when
// unset: the job's defaults apply).
func pacingArgs(p *memoryv1alpha1.PacingSpec) []string {
	if p == nil {
		return nil
	}
	var out []string
	if p.DutyPercent != nil {
		out = append(out, "--duty="+strconv.FormatFloat(float64(*p.DutyPercent)/100, 'f', -1, 64))
	}
	if p.RowsPerSecond != nil {
		out = append(out, "--rows-per-second="+strconv.FormatInt(*p.RowsPerSecond, 10))
	}
	return out
}
