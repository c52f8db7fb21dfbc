package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// The node mode (`make demo-node`): the same story on the real single-node
// Kubernetes of hack/cluster.sh. The image `make image` built is loaded
// into the node, the chart is installed with helm, and the operator, the
// memory service and the maintenance job run as Pods on the kubelet.

// nodeMarker in the state dir says the running demo is the node's (down
// and status act on the node then).
const nodeMarker = "node"

func upNode(ctx context.Context, cfg config) error {
	start := time.Now()
	if os.Getenv("KUBECONFIG") != "" {
		return errors.New("KUBECONFIG is set: make demo-node runs on the node of hack/cluster.sh; on your own cluster, follow the README's \"On a real cluster\"")
	}
	for _, f := range []string{cfg.imageTar, cfg.helm} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s is missing (make demo-node builds it): %w", f, err)
		}
	}
	if err := os.MkdirAll(cfg.stateDir, 0o700); err != nil {
		return err
	}
	if pid, alive := supervisorPID(cfg); alive {
		return fmt.Errorf("the local demo runs (supervisor pid %d): stop it with make demo-down first", pid)
	}
	if err := markIfStopped(cfg, "hack/cluster.sh", "node-started-by-demo"); err != nil {
		return err
	}
	fmt.Println(">> the node: hack/cluster.sh up (kubelet & co. built from Go modules once, then cached)")
	kubeconfig, err := runScript(cfg, "hack/cluster.sh", "up")
	if err != nil {
		return err
	}
	if err := os.WriteFile(cfg.path(nodeMarker), []byte(kubeconfig), 0o600); err != nil {
		return err
	}
	dbURL, err := databaseURL(cfg)
	if err != nil {
		return err
	}
	podDB, err := podDatabaseURL(cfg, dbURL)
	if err != nil {
		return err
	}
	fmt.Printf(">> loading %s into the node (no registry)\n", cfg.imageTar)
	if _, err := runScript(cfg, "hack/cluster.sh", "load", cfg.imageTar); err != nil {
		return err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the node's kubeconfig: %w", err)
	}
	c, err := demo.NewClient(restCfg)
	if err != nil {
		return err
	}
	// No Citus on the node: hack/citus.sh listens on 127.0.0.1 only, out of
	// the Pods' reach (make demo shows the tenant on Citus).
	if err := demo.Prepare(ctx, c, podDB, "", demo.Namespace); err != nil {
		return err
	}
	if err := helmInstall(cfg, kubeconfig); err != nil {
		return err
	}
	sc := &demo.Scenario{
		Client: c, Config: restCfg, Kubeconfig: kubeconfig, Out: os.Stdout,
		SamplesDir: filepath.Join(cfg.repoRoot, "config", "samples"),
		Endpoint:   func(ns, name string) string { return clusterIPURL(ctx, c, ns, name) },
		Wait:       3 * time.Minute,
		// The demo's own namespace: a memory store an earlier demo left
		// (the node started afresh, make demo before) is taken over.
		TakeOverEarlier: true,
	}
	report, err := sc.Run(ctx)
	if err != nil {
		fmt.Printf("\nThe demo failed. Pods: kubectl --kubeconfig %s get pods -A; node logs: %s.\nStop everything with: make demo-down\n",
			kubeconfig, filepath.Join(filepath.Dir(filepath.Dir(kubeconfig)), "logs"))
		return err
	}
	kubectl := "kubectl"
	if bin, err := runScript(cfg, "hack/cluster.sh", "build"); err == nil {
		kubectl = filepath.Join(bin, "kubectl") // the node's own version
	}
	printNodeSummary(cfg, kubeconfig, kubectl, report, time.Since(start))
	return printPluginStatusNode(cfg, kubeconfig, report)
}

// podDatabaseURL forwards the PostgreSQL port to the node's bridge
// address, where Pods reach it, and returns the URL they use.
func podDatabaseURL(cfg config, dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	_, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("the PostgreSQL URL has no port: %w", err)
	}
	hostPort, err := runScript(cfg, "hack/cluster.sh", "forward", port)
	if err != nil {
		return "", err
	}
	u.Host = hostPort
	return u.String(), nil
}

// helmInstall installs (or upgrades) the chart with the loaded image and a
// pull policy that never pulls, and waits for the operator.
func helmInstall(cfg config, kubeconfig string) error {
	ref, tag := cfg.image, "dev"
	for i := len(cfg.image) - 1; i >= 0 && cfg.image[i] != '/'; i-- {
		if cfg.image[i] == ':' {
			ref, tag = cfg.image[:i], cfg.image[i+1:]
			break
		}
	}
	fmt.Printf(">> helm upgrade --install engram charts/engram (image %s:%s, pullPolicy Never)\n", ref, tag)
	cmd := exec.Command(cfg.helm, "upgrade", "--install", "engram", "charts/engram", "--namespace", demo.OperatorNamespace,
		"--set", "image.repository="+ref, "--set", "image.tag="+tag, "--set", "image.pullPolicy=Never",
		"--set", "logFormat=text", "--wait", "--timeout", "5m")
	cmd.Dir, cmd.Stdout, cmd.Stderr = cfg.repoRoot, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("helm install: %w", err)
	}
	return nil
}

// clusterIPURL is the runtime's Service at its ClusterIP, which the host
// of the node reaches through kube-proxy's rules ("" until it exists).
func clusterIPURL(ctx context.Context, c client.Client, ns, name string) string {
	var s corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.ServiceName(name)}, &s); err != nil || s.Spec.ClusterIP == "" || len(s.Spec.Ports) == 0 {
		return ""
	}
	return "http://" + net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(s.Spec.Ports[0].Port)))
}

// downNode stops what upNode started: the node (when the demo started it)
// and PostgreSQL (likewise).
func downNode(cfg config) error {
	var errs []error
	started, err := stopIfStarted(cfg, "node-started-by-demo", "hack/cluster.sh", "down", "the node")
	errs = append(errs, err)
	if !started {
		fmt.Println("the node was running before the demo: left running (hack/cluster.sh down stops it)")
	}
	_ = os.Remove(cfg.path(nodeMarker))
	return errors.Join(errs...)
}

func printNodeSummary(cfg config, kubeconfig, kubectl string, r *demo.Report, took time.Duration) {
	fmt.Printf(`
== Done in %s. Everything keeps running, on a real node.

   Kubernetes       single node (hack/cluster.sh): kubelet, containerd, kube-proxy, kube-router
   kubeconfig       %s
   kubectl          %s
   operator         helm release engram in %s (the image %s, loaded into the node)
   namespace        %s: memorypolicy, memoryruntime/%s, retentionjob
   PostgreSQL       schema %s (login role %s)
   memory service   %s   (ClusterIP; in the cluster: %s)

Explore:
   export KUBECONFIG=%s
   kubectl get pods -A -o wide
   kubectl get engram -n %s
   kubectl logs -n %s deploy/%s
   TOKEN=%s
   curl -s -H "Authorization: Bearer $TOKEN" %s/v1/owners/alice/memories

Node logs: %s
Stop everything: make demo-down
`, took.Round(100*time.Millisecond), kubeconfig, kubectl, demo.OperatorNamespace, cfg.image, demo.Namespace, r.Runtime,
		r.Schema, tenant.LoginRole(r.Schema), r.LocalEndpoint, r.ClusterEndpoint, kubeconfig, demo.Namespace, demo.Namespace,
		naming.DeploymentName(r.Runtime), r.Token, r.LocalEndpoint, filepath.Join(filepath.Dir(filepath.Dir(kubeconfig)), "logs"))
}

// printPluginStatusNode runs `kubectl engram status` through the API
// server's service proxy, which reaches the real Pods on the node.
func printPluginStatusNode(cfg config, kubeconfig string, r *demo.Report) error {
	plugin := filepath.Join(filepath.Dir(cfg.binary), "kubectl-engram")
	args := []string{"status", r.Runtime, "--kubeconfig", kubeconfig, "-n", demo.Namespace}
	fmt.Printf("\n== kubectl engram status %s -n %s\n\n", r.Runtime, demo.Namespace)
	cmd := exec.Command(plugin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running %s %v: %w", plugin, args, err)
	}
	return nil
}
