package packaging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// keptFinding is a kube-score finding Engram keeps on purpose, with the
// reason (docs/operations.md, "What kube-score says", says the same).
type keptFinding struct {
	kind, check, summary string
	why                  string
}

// kubeScoreKept are the findings of kube-score 1.20 on what the operator
// generates (the golden objects of internal/controller) and on the
// chart's objects (two replicas) that are decisions, not defects. Any
// other finding fails the test, and so does an entry here that no longer
// occurs (the list stays exact).
var kubeScoreKept = []keptFinding{
	{"Deployment", "container-image-pull-policy", "ImagePullPolicy is not set to Always",
		"Kubernetes' default (IfNotPresent for a tag, Always for :latest) is kept: Always makes every pod start depend on the registry, and images loaded into a node without a registry could not start; pin an immutable tag or a digest instead"},
	{"CronJob", "container-image-pull-policy", "ImagePullPolicy is not set to Always", "as for the Deployment"},
	{"Job", "container-image-pull-policy", "ImagePullPolicy is not set to Always", "as for the Deployment"},
	{"Deployment", "pod-networkpolicy", "The pod does not have a matching egress NetworkPolicy",
		"the runtime's NetworkPolicy restricts ingress only: the service and its jobs must reach PostgreSQL and the model endpoints, which the operator knows by host name at best, and a NetworkPolicy takes addresses; the chart's operator needs the API server and PostgreSQL likewise"},
	{"CronJob", "pod-networkpolicy", "The pod does not have a matching egress NetworkPolicy", "as for the Deployment"},
	{"Job", "pod-networkpolicy", "The pod does not have a matching egress NetworkPolicy", "as for the Deployment"},
	{"CronJob", "container-resources", "CPU limit is not set",
		"the jobs' default resources have no CPU limit on purpose: throttling would only lengthen the batches that hold locks; spec.resources sets one"},
	{"Job", "container-resources", "CPU limit is not set", "as for the CronJob"},
	{"Deployment", "container-resources", "CPU limit is not set",
		"the service's resources are spec.service.resources as given (the golden runtime sets no CPU limit, which throttles the service at its busiest); the chart's operator has none for the same reason"},
	{"Deployment", "deployment-replicas", "Deployment few replicas",
		"the golden deployment-scaled-to-zero has replicas 0 on purpose"},
}

// TestKubeScore runs kube-score (ENGRAM_KUBE_SCORE, `make test` installs
// it) on the golden objects and on the chart with two replicas, and
// fails on every finding not in kubeScoreKept.
func TestKubeScore(t *testing.T) {
	kubeScore := testenv.Binary(t, "ENGRAM_KUBE_SCORE", "make test installs kube-score into ./bin and sets ENGRAM_KUBE_SCORE (make kube-score runs this test)")
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	root := testenv.RepoRoot()
	golden, err := filepath.Glob(filepath.Join(root, "internal", "controller", "testdata", "golden", "*.yaml"))
	if err != nil || len(golden) < 10 {
		t.Fatalf("golden objects: %v (%v)", golden, err)
	}
	chart := filepath.Join(t.TempDir(), "chart.yaml")
	rendered := run(t, root, helm, "template", "engram", "charts/engram", "--namespace", namespace, "--set", "replicaCount=2")
	if err := os.WriteFile(chart, rendered, 0o600); err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	var unexpected []string
	for what, files := range map[string][]string{"the golden objects": golden, "the chart": {chart}} {
		findings := kubeScoreFindings(t, root, kubeScore, files)
		if len(findings) == 0 {
			t.Errorf("kube-score found nothing at all in %s: is it really checking?", what)
		}
		for _, f := range findings {
			if k := kept(f); k != "" {
				seen[k] = true
				continue
			}
			unexpected = append(unexpected, fmt.Sprintf("%s: %s %s: %s (%s)", what, f.kind, f.object, f.summary, f.check))
		}
	}
	sort.Strings(unexpected)
	for _, u := range unexpected {
		t.Errorf("kube-score finding not decided: %s; fix it, or keep it in kubeScoreKept and docs/operations.md with the reason", u)
	}
	for _, k := range kubeScoreKept {
		if !seen[k.kind+" "+k.check+" "+k.summary] {
			t.Errorf("kept finding %s %s %q no longer occurs: remove it from kubeScoreKept and docs/operations.md", k.kind, k.check, k.summary)
		}
	}
}

type finding struct{ kind, object, check, summary string }

// kubeScoreFindings runs kube-score on files (together: a NetworkPolicy or
// PodDisruptionBudget counts for the pods of the other files) and returns
// every comment of a check that is neither skipped nor passed.
func kubeScoreFindings(t *testing.T, dir, kubeScore string, files []string) []finding {
	t.Helper()
	args := append([]string{"score", "--output-format", "json"}, files...)
	out, err := runAllowFail(dir, kubeScore, args...)
	if err != nil {
		t.Fatalf("kube-score: %v", err)
	}
	var objects []struct {
		ObjectName string `json:"object_name"`
		TypeMeta   struct {
			Kind string `json:"kind"`
		} `json:"type_meta"`
		Checks []struct {
			Check struct {
				ID string `json:"id"`
			} `json:"check"`
			Grade    int  `json:"grade"`
			Skipped  bool `json:"skipped"`
			Comments []struct {
				Summary string `json:"summary"`
			} `json:"comments"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(out, &objects); err != nil {
		t.Fatalf("kube-score's JSON: %v\n%s", err, out)
	}
	var fs []finding
	for _, o := range objects {
		for _, c := range o.Checks {
			if c.Skipped || c.Grade >= 10 { // 10: all OK
				continue
			}
			for _, cm := range c.Comments {
				fs = append(fs, finding{kind: o.TypeMeta.Kind, object: o.ObjectName, check: c.Check.ID, summary: cm.Summary})
			}
		}
	}
	return fs
}

func kept(f finding) string {
	for _, k := range kubeScoreKept {
		if k.kind == f.kind && k.check == f.check && strings.EqualFold(k.summary, f.summary) {
			return k.kind + " " + k.check + " " + k.summary
		}
	}
	return ""
}

// runAllowFail runs bin and returns its stdout; exit code 1 is not an
// error (kube-score exits 1 when it found a critical problem, which the
// caller judges from the output).
func runAllowFail(dir, bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 && len(out) > 0 {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s %v: %w\n%s", filepath.Base(bin), args, err, stderr.String())
	}
	return out, nil
}
