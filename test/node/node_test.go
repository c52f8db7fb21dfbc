// Package node runs Engram on a real Kubernetes node: the single-node
// cluster of hack/cluster.sh (kubelet, containerd, kube-proxy, the CNI
// bridge, kube-router for NetworkPolicies), or the user's own cluster when
// KUBECONFIG is set. The image `make image` builds is loaded into the node,
// the chart is installed with helm (and, in a second pass, config/default
// with kubectl apply -k), and the operator, the memory services and the
// maintenance jobs run as Pods. `make test` runs it; with
// ENGRAM_TEST_REQUIRE_INFRA=1 a node that cannot start fails the suite.
//
// The node is started once per run (TestNode) and, when the suite started
// it, stopped at the end and checked: no process, bridge, chain, mount,
// cgroup or sysctl of it is left on the machine.
package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// env is one installation of the operator on the cluster, and what its
// scenarios share.
type env struct {
	cl *cluster
	// samplesNS holds config/samples (support-bot, standard, nightly),
	// Ready before the scenarios that use it run.
	samplesNS string
	tenants   *tenants
	// full: every scenario (the helm pass); the kustomize pass checks
	// that the other install runs the samples and their jobs.
	full bool
	// monitoringNS is the namespace the chart was told Prometheus runs in
	// (monitoring.namespaceLabels): the only one whose Pods may read the
	// operator's and the memory services' metrics.
	monitoringNS string
}

func TestNode(t *testing.T) {
	cl := startCluster(t)
	dbURL := testenv.NewDatabase(t)
	buildImages(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	podDB, err := cl.podDatabaseURL(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	tn := &tenants{admin: testenv.NewPool(t, dbURL, 2)}
	t.Cleanup(func() { tn.drop(t) })

	t.Run("helm", func(t *testing.T) {
		cl.createNamespace(t, operatorNamespace)
		cl.applyConnection(t, podDB)
		monitoringNS := "e2e-monitoring-" + randomHex(3)
		cl.installHelm(t, monitoringNS)
		e := &env{cl: cl, tenants: tn, full: true, monitoringNS: monitoringNS}
		e.samplesNS = e.namespace(t, "samples")
		t.Run("samples Ready on real Pods, REST and MCP through the Service", e.testSamples)
		t.Run("a RetentionJob's CronJob runs manager job in a Pod", e.testRetention)
		t.Run("kubectl engram against the cluster", e.testPlugin)
		t.Run("NetworkPolicies", e.testNetworkPolicy)
		t.Run("a rollout from 1 to 3 replicas under load", e.testRollout)
		t.Run("scheduling fields reach the Pods; a Pod no node takes is named in the status", e.testScheduling)
		t.Run("kubectl drain is held by the PodDisruptionBudget", e.testDrain)
		t.Run("TLS from a kubernetes.io/tls Secret, verified by the client", e.testTLS)
		t.Run("a deleted service Pod loses no acknowledged write", e.testServicePodDeleted)
		t.Run("a deleted operator Pod: the new leader takes over with 0 writes", e.testOperatorPodDeleted)
		t.Run("a service Pod over its memory limit", e.testOOM)
	})
	t.Run("kustomize", func(t *testing.T) {
		cl.createNamespace(t, operatorNamespace)
		cl.applyConnection(t, podDB)
		cl.installKustomize(t)
		e := &env{cl: cl, tenants: tn}
		e.samplesNS = e.namespace(t, "samples")
		t.Run("samples Ready on real Pods, REST and MCP through the Service", e.testSamples)
		t.Run("a RetentionJob's CronJob runs manager job in a Pod", e.testRetention)
	})
	if cl.ours && !cl.keep {
		t.Run("down leaves the machine as it found it", cl.downAndCheck)
	}
}

// namespace creates a namespace of the run, "restricted" like the
// operator's; tenant roles are cluster-wide in PostgreSQL, so the name is
// unique to the run.
func (e *env) namespace(t *testing.T, what string) string {
	t.Helper()
	ns := "e2e-" + what + "-" + randomHex(3)
	e.cl.createNamespace(t, ns)
	// Before the namespace goes: every runtime that provisioned a schema,
	// Ready or not, is dropped at the end.
	t.Cleanup(func() { e.tenants.addAll(t, e.cl, ns) })
	return ns
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tenants remembers the schemas the runtimes of the run provisioned; the
// samples keep them (reclaimPolicy Retain), so the suite drops them.
type tenants struct {
	admin *pgxpool.Pool
	mu    sync.Mutex
	list  []*memoryv1alpha1.MemoryRuntime
}

func (tn *tenants) add(rt *memoryv1alpha1.MemoryRuntime) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.list = append(tn.list, rt.DeepCopy())
}

// addAll remembers the runtimes of ns that have a schema.
func (tn *tenants) addAll(t *testing.T, cl *cluster, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var list memoryv1alpha1.MemoryRuntimeList
	if err := cl.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Logf("listing the runtimes of %s: %v", ns, err)
		return
	}
	for i := range list.Items {
		if list.Items[i].Status.Schema != "" {
			tn.add(&list.Items[i])
		}
	}
}

func (tn *tenants) drop(t *testing.T) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	done := map[string]bool{}
	for _, rt := range tn.list {
		if rt.Status.Schema == "" || done[rt.Status.Schema] {
			continue
		}
		done[rt.Status.Schema] = true
		owner := tenant.Owner{UID: string(rt.UID), Namespace: rt.Namespace, Name: rt.Name}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := tenant.Drop(ctx, tn.admin, rt.Status.Schema, owner); err != nil {
			t.Logf("dropping tenant %s: %v", rt.Status.Schema, err)
		}
		cancel()
	}
}

// scenarioCtx is the context of one scenario: cancelled when it ends, or
// after timeout.
func scenarioCtx(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
