package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/controller"
	"github.com/engram-dev/engram/internal/testenv"
)

// cluster is where the suite runs: the node of hack/cluster.sh, which the
// suite starts and stops (ours), or the user's own cluster (KUBECONFIG),
// used as it is.
type cluster struct {
	ours bool // the node of hack/cluster.sh
	// keep: ENGRAM_NODE_KEEP=1, the suite leaves the node running (and
	// reuses a running one), for quick iterations on the suite.
	keep       bool
	kubeconfig string
	kubectlBin string
	cfg        *rest.Config
	c          client.Client
	cs         *kubernetes.Clientset
}

// script runs hack/cluster.sh with args and returns its stdout's last line.
func script(ctx context.Context, args ...string) (string, error) {
	out, err := scriptOutput(ctx, args...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), err
}

// scriptOutput runs hack/cluster.sh with args and returns its stdout.
func scriptOutput(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "hack", "cluster.sh"), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("hack/cluster.sh %s: %w\n%s%s", strings.Join(args, " "), err, out.String(), tail(errOut.String(), 40))
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startCluster returns the cluster of this run. Without KUBECONFIG it
// starts the node (fresh: no state of earlier runs) and, when the test
// ends, stops it; the last step of TestNode checks that nothing is left.
// A node that cannot start fails the test under `make test`
// (ENGRAM_TEST_REQUIRE_INFRA=1) and skips it otherwise.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	cl := &cluster{kubeconfig: os.Getenv("KUBECONFIG")}
	if cl.kubeconfig == "" {
		if os.Geteuid() != 0 {
			skipOrFail(t, "the node of hack/cluster.sh needs root; or export KUBECONFIG=<your cluster>")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		cl.ours, cl.keep = true, os.Getenv("ENGRAM_NODE_KEEP") == "1"
		running := false
		if st, _ := script(ctx, "status"); strings.HasPrefix(st, "kubeconfig ") {
			if !cl.keep {
				skipOrFail(t, "the node of hack/cluster.sh is already running (make demo?): stop it (make demo-down), "+
					"or reuse it with ENGRAM_NODE_KEEP=1, or export KUBECONFIG to use it as your own cluster")
			}
			running = true
		}
		start := time.Now()
		args := []string{"up", "--fresh"}
		if running {
			args = []string{"up"}
		}
		kc, err := script(ctx, args...)
		if err != nil {
			// up stops what it started when it fails; make sure anyway.
			_, _ = script(context.Background(), "down")
			skipOrFail(t, "the node did not start: "+err.Error())
		}
		t.Logf("node up in %s (hack/cluster.sh %s)", time.Since(start).Round(time.Second), strings.Join(args, " "))
		cl.kubeconfig = kc
		if !cl.keep {
			t.Cleanup(func() {
				if _, err := script(context.Background(), "down"); err != nil {
					t.Errorf("stopping the node: %v", err)
				}
			})
		}
		bin, err := script(ctx, "build")
		if err != nil {
			t.Fatal(err)
		}
		cl.kubectlBin = filepath.Join(bin, "kubectl")
	} else {
		path, err := exec.LookPath("kubectl")
		if env := os.Getenv("ENGRAM_KUBECTL"); env != "" {
			path, err = env, nil
		}
		if err != nil {
			skipOrFail(t, "KUBECONFIG is set but there is no kubectl on PATH (or ENGRAM_KUBECTL)")
		}
		cl.kubectlBin = path
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.kubeconfig)
	if err != nil {
		t.Fatalf("reading %s: %v", cl.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cl.cfg = cfg
	if cl.c, err = client.New(cfg, client.Options{Scheme: controller.NewScheme()}); err != nil {
		t.Fatal(err)
	}
	if cl.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return cl
}

// skipOrFail is the node suite's testenv.Missing: a cluster it cannot get
// fails the suite under `make test` and skips it otherwise.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	testenv.Missing(t, "a Kubernetes cluster for the node suite", why)
}

// kubectl runs kubectl against the cluster and returns its stdout.
func (cl *cluster) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, cl.kubectlBin, append([]string{"--kubeconfig", cl.kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// loadImages makes the image tarballs available to the node's runtime: on
// the node, hack/cluster.sh load; on the user's cluster, the command in
// ENGRAM_IMAGE_LOAD (e.g. "kind load image-archive") with each tarball.
func (cl *cluster) loadImages(ctx context.Context, tarballs ...string) error {
	if cl.ours {
		_, err := script(ctx, append([]string{"load"}, tarballs...)...)
		return err
	}
	load := strings.Fields(os.Getenv("ENGRAM_IMAGE_LOAD"))
	if len(load) == 0 {
		return errors.New("KUBECONFIG is set: export ENGRAM_IMAGE_LOAD with the command that loads an image tarball into your cluster " +
			"(kind load image-archive, k3d image import, ...)")
	}
	for _, tb := range tarballs {
		cmd := exec.CommandContext(ctx, load[0], append(load[1:], tb)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w\n%s", strings.Join(load, " "), tb, err, out)
		}
	}
	return nil
}

// podDatabaseURL turns the suite's database URL (on 127.0.0.1) into one
// Pods can use: on the node, a forward of its port to the node's bridge
// address; on the user's cluster, the host:port in ENGRAM_POD_DATABASE_HOST.
func (cl *cluster) podDatabaseURL(ctx context.Context, dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	var hostPort string
	if cl.ours {
		_, port, err := net.SplitHostPort(u.Host)
		if err != nil {
			return "", fmt.Errorf("DATABASE_URL has no port: %w", err)
		}
		if hostPort, err = script(ctx, "forward", port); err != nil {
			return "", err
		}
	} else if hostPort = os.Getenv("ENGRAM_POD_DATABASE_HOST"); hostPort == "" {
		return "", errors.New("KUBECONFIG is set: export ENGRAM_POD_DATABASE_HOST=host:port, where Pods of your cluster reach the PostgreSQL of DATABASE_URL")
	}
	u.Host = hostPort
	return u.String(), nil
}

// downAndCheck stops the node and fails unless the machine is as the
// node found it: hack/cluster.sh status exits 1 (down, nothing left) and
// lists every process, bridge, chain, set, mount, cgroup, sysctl or path
// of the node that is still there otherwise.
func (cl *cluster) downAndCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := script(ctx, "down"); err != nil {
		t.Fatal(err)
	}
	t.Logf("node down in %s", time.Since(start).Round(time.Second))
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "hack", "cluster.sh"), "status")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("after down, hack/cluster.sh status says (%v):\n%s", err, out)
	}
	t.Logf("hack/cluster.sh status: %s", strings.TrimSpace(string(out)))
}
