// Package packaging tests what users install: the Helm chart and the
// kustomize overlay render, every object they produce is accepted by a real
// kube-apiserver (server-side dry-run apply), and the chart carries the same
// CRDs and RBAC as config/.
package packaging

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/controller"
	"github.com/engram-dev/engram/internal/testenv"
)

const namespace = "engram-system"

func TestChartAndKustomizeApply(t *testing.T) {
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	kustomize := testenv.Binary(t, "ENGRAM_KUSTOMIZE", "make test builds kustomize into ./bin and sets ENGRAM_KUSTOMIZE")
	root := testenv.RepoRoot()
	renders := map[string][]byte{
		"helm template (defaults)": run(t, root, helm, "template", "engram", "charts/engram", "--namespace", namespace, "--include-crds"),
		"helm template (watch namespaces)": run(t, root, helm, "template", "engram", "charts/engram",
			"--namespace", namespace, "--set", "watchNamespaces={team-a,team-b}"),
		"helm template (metrics NetworkPolicy peers)": run(t, root, helm, "template", "engram", "charts/engram",
			"--namespace", namespace, "--set", "networkPolicy.allowedNamespaces={monitoring}",
			"--set-json", `networkPolicy.from=[{"namespaceSelector":{"matchLabels":{"team":"obs"}},"podSelector":{"matchLabels":{"app":"prometheus"}}}]`),
		"helm template (2 replicas, scheduling values)": run(t, root, helm, append([]string{"template", "engram", "charts/engram",
			"--namespace", namespace}, schedulingValues...)...),
		"kustomize build config/default": run(t, root, kustomize, "build", "config/default"),
	}

	_, cfg := testenv.ControlPlane(t)
	c, err := client.New(cfg, client.Options{Scheme: controller.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{namespace, "team-a", "team-b"} {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for what, out := range renders {
		t.Run(what, func(t *testing.T) {
			objs := decode(t, out)
			if len(objs) < 5 {
				t.Fatalf("%s rendered only %d objects", what, len(objs))
			}
			for _, u := range objs {
				if u.GetKind() == "Namespace" {
					continue // created above, for real: dry-run objects cannot live in a dry-run namespace
				}
				err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.FieldOwner("packaging-test"), client.ForceOwnership)
				if err != nil {
					t.Errorf("the API server refuses %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
				}
			}
			t.Logf("%s: %d objects accepted by server-side dry-run", what, len(objs))
		})
	}
}

// TestChartMatchesConfig: the chart ships copies of the generated CRDs and
// ClusterRole and of the admission policy (make manifests writes them); a
// stale copy fails here.
func TestChartMatchesConfig(t *testing.T) {
	root := testenv.RepoRoot()
	pairs := map[string]string{
		filepath.Join("config", "rbac", "role.yaml"):                 filepath.Join("charts", "engram", "files", "role.yaml"),
		filepath.Join("config", "admission", "metadata-bounds.yaml"): filepath.Join("charts", "engram", "files", "metadata-bounds.yaml"),
	}
	crds, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) != 4 {
		t.Fatalf("config/crd/bases holds %d CRDs (%v), want 4", len(crds), err)
	}
	for _, p := range crds {
		rel, _ := filepath.Rel(root, p)
		pairs[rel] = filepath.Join("charts", "engram", "crds", filepath.Base(p))
	}
	for config, chart := range pairs {
		a, errA := os.ReadFile(filepath.Join(root, config))
		b, errB := os.ReadFile(filepath.Join(root, chart))
		if err := errors.Join(errA, errB); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: run make manifests", chart, config)
		}
	}
}

func run(t *testing.T, dir, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, stderr.String())
	}
	return out
}

func decode(t *testing.T, manifest []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decoding the rendered manifest: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
