package controller

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/jobrun"
	"github.com/engram-dev/engram/internal/naming"
)

// reembeddingRuntime is testRuntime whose spec names an OpenAI embedder
// with a key (the one a re-embed fills with).
func reembeddingRuntime() *memoryv1alpha1.MemoryRuntime {
	rt := testRuntime()
	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "text-embedding-3-small",
		Endpoint: "https://api.openai.example/v1", Dimensions: 384, APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "openai-key"}}
	return rt
}

// TestReembedJob: the Job runs the reembed operation with the new
// embedder's flags and key (from the spec's Secret, never a value), is
// owned by the runtime, is not retried by the Job controller, and fails
// by its pod failure policy on the exit code of an unreachable embedder.
func TestReembedJob(t *testing.T) {
	if specs.ReembedExitUnreachable != jobrun.ExitEmbedderUnreachable {
		t.Fatalf("the Job's exit code %d is not jobrun's %d", specs.ReembedExitUnreachable, jobrun.ExitEmbedderUnreachable)
	}
	cases := []struct {
		name    string
		rt      *memoryv1alpha1.MemoryRuntime
		to      memoryv1alpha1.RuntimeEmbedder
		want    []string
		notWant []string
		keyEnv  bool
	}{
		{name: "openai", rt: reembeddingRuntime(),
			to: memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "text-embedding-3-small", Dimensions: 384},
			want: []string{"--ops=reembed", "--reembed-provider=openai", "--reembed-model=text-embedding-3-small",
				"--reembed-endpoint=https://api.openai.example/v1", "--reembed-dimensions=384", "--config=" + naming.ConfigPath},
			keyEnv: true},
		{name: "builtin", rt: testRuntime(), to: memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingBuiltin, Dimensions: 384},
			want:    []string{"--ops=reembed", "--reembed-provider=builtin", "--reembed-dimensions=384"},
			notWant: []string{"--reembed-model=", "--reembed-endpoint="}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := specs.ReembedJob(tc.rt, "img:1", tc.to, 7)
			if job.Name != "bot-reembed-7" || job.Namespace != "team-a" || !metav1.IsControlledBy(job, tc.rt) {
				t.Errorf("job %s/%s, owners %+v", job.Namespace, job.Name, job.OwnerReferences)
			}
			if job.Labels[naming.LabelComponent] != naming.ComponentReembed || job.Labels[naming.LabelManagedBy] != naming.ManagedBy {
				t.Errorf("labels %v", job.Labels)
			}
			c := job.Spec.Template.Spec.Containers[0]
			for _, w := range tc.want {
				if !slices.Contains(c.Command, w) {
					t.Errorf("command %q lacks %s", c.Command, w)
				}
			}
			for _, nw := range tc.notWant {
				for _, arg := range c.Command {
					if len(arg) >= len(nw) && arg[:len(nw)] == nw {
						t.Errorf("command has %s", arg)
					}
				}
			}
			key := false
			for _, e := range c.Env {
				if e.Value != "" {
					t.Errorf("env %s carries a value", e.Name)
				}
				if e.Name == naming.EnvEmbeddingAPIKey && e.ValueFrom.SecretKeyRef.Name == "openai-key" {
					key = true
				}
			}
			if key != tc.keyEnv {
				t.Errorf("embedding key from the spec's Secret: %v, want %v", key, tc.keyEnv)
			}
			if *job.Spec.BackoffLimit != 0 || job.Spec.ActiveDeadlineSeconds == nil {
				t.Errorf("backoffLimit %d, activeDeadlineSeconds %v", *job.Spec.BackoffLimit, job.Spec.ActiveDeadlineSeconds)
			}
			rules := job.Spec.PodFailurePolicy.Rules
			if len(rules) != 1 || rules[0].Action != batchv1.PodFailurePolicyActionFailJob ||
				!slices.Equal(rules[0].OnExitCodes.Values, []int32{specs.ReembedExitUnreachable}) {
				t.Errorf("pod failure policy %+v", job.Spec.PodFailurePolicy)
			}
		})
	}
}
