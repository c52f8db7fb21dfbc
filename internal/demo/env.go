// Package demo is Engram's whole flow on one machine: a real control plane
// (kube-apiserver + etcd), the operator, the local pod runner, the samples,
// and a scenario against the memory service's HTTP API. `make demo` runs it
// for people (hack/demo), test/e2e runs it with assertions, so the demo
// cannot rot.
package demo

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/engram-dev/engram/internal/controller"
	"github.com/engram-dev/engram/internal/localpod"
	"github.com/engram-dev/engram/internal/naming"
)

// Names the demo uses.
const (
	// OperatorNamespace holds the admin connection Secret.
	OperatorNamespace = "engram-system"
	// Namespace receives config/samples.
	Namespace = "demo"
	// ConnectionName is the clusterConnection the samples refer to.
	ConnectionName = "main"
	// FieldOwner of what the demo applies.
	FieldOwner = "engram-demo"
	// ServiceImage is what the Deployments name; locally the manager binary runs instead.
	ServiceImage = "ghcr.io/engram-dev/engram:dev"
)

// ControlPlane is a running kube-apiserver + etcd with Engram's CRDs.
type ControlPlane struct {
	Env        *envtest.Environment
	Config     *rest.Config
	Kubeconfig []byte
}

// StartControlPlane starts kube-apiserver and etcd from assets (the
// KUBEBUILDER_ASSETS directory of hack/envtest.sh) and installs the CRDs of
// repoRoot/config/crd/bases. etcdDir keeps etcd's data between runs when it
// is not empty ("" = a temporary directory removed on Stop). The demo keeps
// it: its tenant schemas live on in PostgreSQL, and they carry the UID of
// the MemoryRuntime that created them, so a control plane that forgot that
// object would make a new runtime with a new UID, which the operator
// rightly refuses to let take the old schema over.
func StartControlPlane(assets, repoRoot, etcdDir string) (*ControlPlane, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if etcdDir != "" {
		if err := os.MkdirAll(etcdDir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the etcd data directory: %w", err)
		}
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start can fail after the processes run
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "engram-demo", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating the demo user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &ControlPlane{Env: env, Config: cfg, Kubeconfig: kubeconfig}, nil
}

// NewClient returns a client for cfg with Engram's kinds registered.
func NewClient(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: controller.NewScheme()})
}

// Prepare creates the namespaces and the admin connection Secret (label
// memory.engram.dev/connection=main in the operator namespace, the way a
// platform team keeps admin credentials out of tenant namespaces), and with
// citusURL (a Citus coordinator; "" for none) the Citus cluster's admin
// Secret, which the scenario's MemoryDatabase citus names.
func Prepare(ctx context.Context, c client.Client, databaseURL, citusURL, namespace string) error {
	for _, ns := range []string{OperatorNamespace, namespace} {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	secret := corev1ac.Secret("postgres-admin", OperatorNamespace).
		WithLabels(map[string]string{naming.LabelConnection: ConnectionName}).
		WithData(map[string][]byte{"uri": []byte(databaseURL)})
	if err := c.Apply(ctx, secret, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the admin connection Secret: %w", err)
	}
	if citusURL == "" {
		return nil
	}
	citus := corev1ac.Secret(CitusSecret, OperatorNamespace).WithData(map[string][]byte{"uri": []byte(citusURL)})
	if err := c.Apply(ctx, citus, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the Citus admin Secret: %w", err)
	}
	return nil
}

// StartOperator runs the operator in-process until ctx ends; the returned
// channel yields its exit error.
func StartOperator(ctx context.Context, cfg *rest.Config, log *slog.Logger) (<-chan error, error) {
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	opts := controller.Options{OperatorNamespace: OperatorNamespace, ServiceImage: ServiceImage, GrantCheckInterval: 10 * time.Minute}
	mgr, err := controller.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// One operator at a time, but test/e2e starts one per test in one
		// process, and controller names are checked process-wide.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}, opts)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

// NewKubelet returns the local pod runner for the operator's objects.
func NewKubelet(cfg *rest.Config, binary, dir string, log *slog.Logger) (*localpod.Kubelet, error) {
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("the manager binary %s is missing (make build): %w", binary, err)
	}
	return &localpod.Kubelet{Client: c, Binary: binary, Dir: dir, Log: log}, nil
}
