package specs

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// ReembedExitUnreachable is the exit code of a re-embed run that stopped
// because the new embedder kept failing (jobrun); the Job's pod failure
// policy names it, so the operator tells it from other failures
// (EmbedderUnreachable).
const ReembedExitUnreachable int32 = 3

// ReembedActiveDeadlineSeconds bounds one re-embed Job; the run itself
// stops filling before (--reembed-max-run), and the next Job resumes.
const ReembedActiveDeadlineSeconds int64 = 3600

// ReembedJob is the run-th Job of the re-embed of rt's vectors to the
// embedder spec.embedding names: `manager job --ops=reembed` with the
// runtime's config (schema, database) and login credentials, and the new
// embedder's endpoint, model and key (the spec's, as the service would get
// them after the switch). The service's config still names the recorded
// embedder: the flags name the one to fill with.
func ReembedJob(rt *memoryv1alpha1.MemoryRuntime, image string, to memoryv1alpha1.RuntimeEmbedder, run int32) *batchv1.Job {
	meta := ownedMeta(rt, naming.ReembedJobName(rt.Name, run), naming.ComponentReembed)
	cmd := []string{
		naming.BinaryPath, "job",
		"--config=" + naming.ConfigPath,
		"--ops=reembed",
		"--termination-log=" + naming.TerminationLogPath,
		"--reembed-provider=" + string(to.Provider),
		"--reembed-dimensions=" + strconv.Itoa(int(to.Dimensions)),
	}
	if to.Model != "" {
		cmd = append(cmd, "--reembed-model="+to.Model)
	}
	if e := rt.Spec.Embedding.Endpoint; e != "" && to.Provider == memoryv1alpha1.EmbeddingOpenAI {
		cmd = append(cmd, "--reembed-endpoint="+e)
	}
	spec := batchv1.JobSpec{
		BackoffLimit:          ptr.To[int32](0),
		ActiveDeadlineSeconds: ptr.To(ReembedActiveDeadlineSeconds),
		PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To(naming.ContainerJob),
				Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
				Values:        []int32{ReembedExitUnreachable},
			},
		}}},
		Template: jobPod(rt, image, meta.Labels, cmd, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		}, tenantEnv(rt)),
	}
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: meta, Spec: spec}
}
