package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// testPlugin: kubectl finds the kubectl-engram plugin on PATH, and
// status, memories (through the API server's service proxy to the real
// Pods) and run-now (its Job runs on the node) work against the cluster.
func (e *env) testPlugin(t *testing.T) {
	ctx := scenarioCtx(t, 5*time.Minute)
	dir := t.TempDir()
	// The flags of make build (GOBUILD), so a cold run compiles nothing twice.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "kubectl-engram"), "./cmd/kubectl-engram")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-engram: %v\n%s", err, out)
	}
	ns := e.samplesNS
	e.ensureSamples(t)
	if _, err := e.service(t, ns, sampleRuntime).add(ctx, "carol", "Carol reads her memories with kubectl engram"); err != nil {
		t.Fatal(err)
	}
	engram := func(args ...string) string {
		t.Helper()
		// kubectl takes no flag before a plugin's name: the kubeconfig goes by env.
		cmd := exec.CommandContext(ctx, e.cl.kubectlBin, append(append([]string{"engram"}, args...), "-n", ns)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+e.cl.kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl engram %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := engram("status", sampleRuntime); !strings.Contains(out, "Ready") || !strings.Contains(out, "True") {
		t.Errorf("kubectl engram status %s:\n%s", sampleRuntime, out)
	}
	if out := engram("status"); !strings.Contains(out, sampleRuntime) {
		t.Errorf("kubectl engram status (table):\n%s", out)
	}
	if out := engram("memories", sampleRuntime, "carol"); !strings.Contains(out, "kubectl engram") {
		t.Errorf("kubectl engram memories %s carol:\n%s", sampleRuntime, out)
	}
	if out := engram("run-now", "nightly", "--wait"); !strings.Contains(out, "Succeeded") {
		t.Errorf("kubectl engram run-now nightly --wait:\n%s", out)
	}
}
