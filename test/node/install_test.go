package node

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// The operator's namespace and names: the chart's release "engram" and
// config/default name everything alike.
const (
	operatorNamespace  = "engram-system"
	operatorDeployment = "engram-operator"
	connectionName     = "main" // the samples' clusterConnection
	fieldOwner         = "engram-node-suite"
)

// operatorPods select the operator's Pods: the labels the chart and
// config/default give them (a contract of the packaging, spelled out).
var operatorPods = client.MatchingLabels{naming.LabelName: naming.AppName, naming.LabelComponent: "operator"}

// restrictedLabels make the namespace enforce the "restricted" Pod
// Security Standard: the operator, its services and its jobs must pass it.
var restrictedLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// createNamespace creates ns enforcing "restricted" and deletes it (and
// waits for it to go) when the test ends.
func (cl *cluster) createNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: restrictedLabels}}
	if err := cl.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(func() { cl.deleteNamespace(t, ns) })
}

func (cl *cluster) deleteNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := cl.c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s: %v", ns, err)
		return
	}
	err := poll(ctx, time.Second, func() (bool, error) {
		err := cl.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("namespace %s did not go away: %v", ns, err)
	}
}

// applyConnection writes the platform team's admin connection Secret (the
// samples' clusterConnection "main") into the operator's namespace.
func (cl *cluster) applyConnection(t *testing.T, podDBURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secret := corev1ac.Secret("postgres-admin", operatorNamespace).
		WithLabels(map[string]string{naming.LabelConnection: connectionName}).
		WithData(map[string][]byte{naming.KeyURI: []byte(podDBURL)})
	if err := cl.c.Apply(ctx, secret, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		t.Fatalf("applying the admin connection Secret: %v", err)
	}
}

// installHelm installs charts/engram the way the README tells users to,
// with the suite's image, a pull policy that never pulls and monitoringNS
// as the namespace Prometheus runs in, and uninstalls it when the test ends.
func (cl *cluster) installHelm(t *testing.T, monitoringNS string) {
	t.Helper()
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	args := []string{"install", "engram", "charts/engram", "--namespace", operatorNamespace,
		"--set", "image.repository=" + imageRepo, "--set", "image.tag=" + imageTag, "--set", "image.pullPolicy=Never",
		"--set", "logFormat=text", "--set", `monitoring.namespaceLabels.kubernetes\.io/metadata\.name=` + monitoringNS,
		"--wait", "--timeout", "5m"}
	if out, err := cl.tool(ctx, helm, args...); err != nil {
		// helm says only "context deadline exceeded": the Pods and their
		// events say why the operator never became Ready.
		t.Fatalf("helm %s: %v\n%s\n%s\n%s", strings.Join(args, " "), err, out,
			cl.describePods(operatorNamespace), cl.operatorLogs())
	}
	t.Logf("helm install: operator Ready in %s", time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cl.runTool(t, ctx, helm, "uninstall", "engram", "--namespace", operatorNamespace, "--wait", "--timeout", "3m")
	})
	cl.waitOperator(t)
}

// installKustomize applies config/default through the suite's overlay
// (test/node/kustomize: the suite's image tag, pull policy Never) with
// kubectl apply -k, and deletes it when the test ends.
func (cl *cluster) installKustomize(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	overlay := filepath.Join(testenv.RepoRoot(), "test", "node", "kustomize")
	start := time.Now()
	if out, err := cl.kubectl(ctx, "apply", "--server-side", "--field-manager", fieldOwner, "-k", overlay); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// The CRDs go too: the namespaces of the tests are gone by now, so
		// no object waits for the operator's finalizer.
		if out, err := cl.kubectl(ctx, "delete", "-k", overlay, "--ignore-not-found", "--wait", "--timeout", "4m"); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})
	cl.waitOperator(t)
	t.Logf("kubectl apply -k: operator Ready in %s", time.Since(start).Round(100*time.Millisecond))
}

// runTool runs a command from the repository root with the cluster's kubeconfig.
func (cl *cluster) runTool(t *testing.T, ctx context.Context, name string, args ...string) {
	t.Helper()
	if out, err := cl.tool(ctx, name, args...); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// tool runs a command from the repository root with the cluster's
// kubeconfig and returns its combined output.
func (cl *cluster) tool(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+cl.kubeconfig)
	return cmd.CombinedOutput()
}

// operatorLogs is the tail of the operator Pods' logs (the previous
// container's too, when one restarted), for failure messages.
func (cl *cluster) operatorLogs() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sel := "app.kubernetes.io/name=engram"
	cur, _ := cl.kubectl(ctx, "-n", operatorNamespace, "logs", "-l", sel, "--all-containers", "--tail", "40")
	prev, _ := cl.kubectl(ctx, "-n", operatorNamespace, "logs", "-l", sel, "--all-containers", "--previous", "--tail", "40")
	return "logs:\n" + cur + "\nprevious:\n" + prev
}

// waitOperator waits until the operator's Deployment has every replica
// available (its readiness probe passed on the real kubelet).
func (cl *cluster) waitOperator(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var d appsv1.Deployment
	err := poll(ctx, time.Second, func() (bool, error) {
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, &d); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= 1 &&
			d.Status.UpdatedReplicas == d.Status.Replicas, nil
	})
	if err != nil {
		t.Fatalf("the operator did not become available: %v (status %+v)\n%s", err, d.Status, cl.describePods(operatorNamespace))
	}
}

// describePods is the state of a namespace's Pods, for failure messages.
func (cl *cluster) describePods(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := cl.kubectl(ctx, "-n", ns, "get", "pods", "-o", "wide")
	if err != nil {
		return err.Error()
	}
	ev, _ := cl.kubectl(ctx, "-n", ns, "get", "events", "--sort-by", ".lastTimestamp")
	// A Pod the scheduler cannot place names only "untolerated taint":
	// the node's taints say which (disk-pressure when the host is full).
	taints, _ := cl.kubectl(ctx, "get", "nodes", "-o", "custom-columns=NODE:.metadata.name,TAINTS:.spec.taints[*].key")
	return out + "\n" + tail(ev, 30) + "\n" + taints
}

// poll calls cond every interval until it is true, fails, or ctx ends.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
