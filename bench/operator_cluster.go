package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller"
)

// repoRoot finds the directory of the product's go.mod from the working
// directory (make runs the harness from the repository root).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "config", "crd", "bases")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the harness inside the repository (config/crd/bases not found)")
		}
		dir = parent
	}
}

// controlPlane starts kube-apiserver + etcd from KUBEBUILDER_ASSETS with the
// CRDs installed, as internal/testenv does for tests, and returns it with
// the harness's client of it; the caller stops it (stopControlPlane).
func (h *harness) controlPlane() (*envtest.Environment, *rest.Config, client.Client, error) {
	env, cfg, err := h.startControlPlane()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: controller.NewScheme()})
	if err != nil {
		h.cleanup("control plane", func() error { return stopControlPlane(env) })
		return nil, nil, nil, fmt.Errorf("a client of the control plane: %w", err)
	}
	return env, cfg, c, nil
}

func (h *harness) startControlPlane() (*envtest.Environment, *rest.Config, error) {
	if h.assets == "" {
		return nil, nil, errors.New("KUBEBUILDER_ASSETS is not set: export KUBEBUILDER_ASSETS=$(hack/envtest.sh)")
	}
	root, err := repoRoot()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: h.assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	policy := filepath.Join(h.workDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, nil, err
	}
	// envtest's default Service range is a /24: 254 Services, fewer than
	// the runtimes of the full benchmark (a real cluster has a /12 or so).
	env.ControlPlane.GetAPIServer().Configure().
		Set("service-cluster-ip-range", "10.0.0.0/16").
		Set("audit-policy-file", policy).
		Set("audit-log-path", h.auditLog()).
		Set("audit-log-format", "json")
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the envtest control plane: %w", err)
	}
	// The harness talks a lot at the start (creates, status patches): no
	// client-side throttling, as controller-runtime does for the operator.
	cfg.QPS, cfg.Burst = -1, 0
	return env, cfg, nil
}

func (h *harness) auditLog() string { return filepath.Join(h.workDir, "audit.log") }

// operatorUser is the operator's user name in the API server (and its audit log).
const operatorUser = "engram-operator-bench"

// operatorKubeconfig writes a kubeconfig of a user of its own for the
// operator process (system:masters: RBAC is not what is measured here).
func (h *harness) operatorKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: operatorUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("adding the operator's user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("writing the operator's kubeconfig: %w", err)
	}
	path := filepath.Join(h.workDir, "operator.kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

const (
	operatorNamespace = "engram-system"
	adminSecretName   = "pg-admin"
)

func namespaceName(i int) string { return fmt.Sprintf("bench-%02d", i) }
func runtimeName(i int) string   { return fmt.Sprintf("rt-%04d", i) }

// namespacesFor spreads the runtimes over up to 10 namespaces, as tenants
// of several teams would be, and over more when a namespace would hold more
// than maxRuntimesPerNamespace.
func namespacesFor(runtimes int) int {
	return max(min(10, max(1, runtimes/20)), (runtimes+maxRuntimesPerNamespace-1)/maxRuntimesPerNamespace)
}

// maxRuntimesPerNamespace keeps a namespace within its connection share:
// each login role needs one connection of the namespace's share
// (--tenant-connection-share, 25 % of the server's slots), which is 74 on
// the 300-connection server of hack/pgvector.sh. With 100 runtimes in a
// namespace (1,000 in 10), the 75th and later were refused
// ConnectionShareExhausted, as the operator must.
const maxRuntimesPerNamespace = 50

// prepareNamespaces creates the namespaces and, in each, the admin
// connection Secret the runtimes reference.
func prepareNamespaces(ctx context.Context, c client.Client, n int, adminURL string) error {
	for _, ns := range append([]string{operatorNamespace}, namespaces(n)...) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	for _, ns := range namespaces(n) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: adminSecretName},
			StringData: map[string]string{"uri": adminURL}}
		if err := c.Create(ctx, sec); err != nil {
			return fmt.Errorf("creating the admin Secret in %s: %w", ns, err)
		}
	}
	return nil
}

func namespaces(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = namespaceName(i)
	}
	return out
}

// newRuntime is the MemoryRuntime a platform team would write: builtin
// embeddings, the default policy, an admin connection Secret.
func newRuntime(i, nNamespaces int) *memoryv1alpha1.MemoryRuntime {
	return &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespaceName(i % nNamespaces), Name: runtimeName(i)},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database: memoryv1alpha1.DatabaseSpec{ConnectionSecretRef: &memoryv1alpha1.SecretKeySelector{Name: adminSecretName}},
			Service:  memoryv1alpha1.ServiceSpec{Replicas: ptr.To[int32](1)},
		},
	}
}

// schemaOf is the schema the operator derives for a runtime.
func schemaOf(rt *memoryv1alpha1.MemoryRuntime) string { return controller.SchemaFor(rt) }

// stopControlPlane stops envtest, bounded (a wedged etcd must not hang the run).
func stopControlPlane(env *envtest.Environment) error {
	done := make(chan error, 1)
	go func() { done <- env.Stop() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		return errors.New("the control plane did not stop within a minute")
	}
}
