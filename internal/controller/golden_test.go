package controller

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
)

// updateGolden rewrites testdata/golden/*.yaml from the builders:
//
//	go test ./internal/controller/ -run TestGolden -update
var updateGolden = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// TestGolden pins every object the operator generates: a change to a
// builder shows in the pull request's diff of testdata/golden, and fails
// here until the golden file is regenerated with -update.
func TestGolden(t *testing.T) {
	rt := testRuntime()
	rt.Spec.Embedding.APIKeySecretRef = &memoryv1alpha1.SecretKeySelector{Name: "openai"}
	cfg, err := specs.MarshalServiceConfig(specs.ServiceConfig(rt, "engram_team_a_bot", memory.DefaultPolicy(), "", 0))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := specs.LoginCredentials("postgres://admin:secret@db.example:5432/app?sslmode=require", "engram_team_a_bot", "golden-password")
	if err != nil {
		t.Fatal(err)
	}
	rj := testRetentionJob()
	cj := specs.CronJob(rj, rt, "registry.example/engram:v1")
	objects := map[string]client.Object{
		"deployment":         specs.Deployment(rt, "registry.example/engram:v1", specs.PodTemplateHash(cfg, specs.PasswordDigest(creds.Password))),
		"service":            specs.Service(rt),
		"configmap":          specs.ConfigMap(rt, cfg),
		"secret-credentials": specs.CredentialsSecret(rt, creds),
		"secret-api-token":   specs.APITokenSecret(rt, "admin:golden-token-digest", "golden-signing-key"),
		"cronjob":            cj,
		"job-run-now":        specs.RunNowJob(cj, "2026-01-01"),
		"networkpolicy":      specs.NetworkPolicy(rt, Options{}.withDefaults().MetricsNamespaces),
	}
	objects["poddisruptionbudget"] = specs.PodDisruptionBudget(rt)
	objects["job-reembed"] = specs.ReembedJob(reembeddingRuntime(), "registry.example/engram:v1",
		memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "text-embedding-3-small", Dimensions: 384}, 2)
	objects["cronjob-export-s3"] = specs.CronJob(exportingJob(&memoryv1alpha1.ExportSpec{Vectors: true, S3: &memoryv1alpha1.ExportS3{
		Endpoint: "https://s3.eu-west-1.amazonaws.com", Bucket: "engram-backups", Prefix: "team-a/", Region: "eu-west-1",
		CredentialsSecretRef: memoryv1alpha1.S3CredentialsSecretRef{Name: "s3-backup"}}}), rt, "registry.example/engram:v1")
	objects["cronjob-export-pvc"] = specs.CronJob(exportingJob(&memoryv1alpha1.ExportSpec{
		PVC: &memoryv1alpha1.ExportPVC{ClaimName: "backups", SubPath: "engram"}}), rt, "registry.example/engram:v1")
	// Every scheduling knob and TLS (builders_workload_test.go tests them one by one).
	placed := placedRuntime()
	placed.Spec.Service.TLS = &memoryv1alpha1.ServiceTLS{SecretName: "bot-tls"}
	objects["deployment-placed-tls"] = specs.Deployment(placed, "registry.example/engram:v1", "hash")
	objects["cronjob-placed"] = specs.CronJob(rj, placed, "registry.example/engram:v1")
	scaled := testRuntime()
	scaled.Spec.Service.Replicas = ptr.To[int32](0)
	objects["deployment-scaled-to-zero"] = specs.Deployment(scaled, "registry.example/engram:v1", "hash")

	for name, obj := range objects {
		t.Run(name, func(t *testing.T) {
			got, err := yaml.Marshal(readable(obj))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".yaml")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the builder's output (- golden, + built; run with -update if the change is intended):\n%s", path, lineDiff(string(want), string(got)))
			}
		})
	}
}

// readable shows a Secret's data as text (stringData) in its golden file,
// so a reviewer reads the values instead of base64.
func readable(obj client.Object) client.Object {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj
	}
	s = s.DeepCopy()
	s.StringData = map[string]string{}
	for k, v := range s.Data {
		s.StringData[k] = string(v)
	}
	s.Data = nil
	return s
}

// lineDiff is a small line-based diff (longest common subsequence): the
// lines only in a with "- ", only in b with "+ ", two lines of context.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the LCS length of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			lines = append(lines, line{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', x[i]})
			i++
		default:
			lines = append(lines, line{'+', y[j]})
			j++
		}
	}
	var out strings.Builder
	const context = 2
	for k, l := range lines {
		near := false
		for d := max(0, k-context); d <= min(len(lines)-1, k+context); d++ {
			if lines[d].op != ' ' {
				near = true
			}
		}
		if near {
			fmt.Fprintf(&out, "%c %s\n", l.op, l.text)
		}
	}
	return out.String()
}

// TestLineDiff: the diff names what changed, and only that.
func TestLineDiff(t *testing.T) {
	got := lineDiff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\n")
	want := "  b\n  c\n- d\n+ D\n  e\n  f\n"
	if got != want {
		t.Errorf("lineDiff =\n%s\nwant\n%s", got, want)
	}
}
