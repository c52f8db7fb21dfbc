package testenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane starts a real kube-apiserver + etcd (from KUBEBUILDER_ASSETS)
// with the CRDs of config/crd/bases installed, and stops it when the test ends.
func ControlPlane(t testing.TB) (*envtest.Environment, *rest.Config) {
	t.Helper()
	assets := requiredEnv(t, "KUBEBUILDER_ASSETS", "the envtest control plane", "export KUBEBUILDER_ASSETS=$(hack/envtest.sh)")
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			Missing(t, "the envtest control plane ("+bin+")", "KUBEBUILDER_ASSETS="+assets+" has no "+bin+"; run hack/envtest.sh")
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout(),
	}
	cfg, err := env.Start()
	if err != nil {
		// Start may fail after the processes run (e.g. a CRD the API server
		// refuses): stop them, or they outlive the test.
		_ = env.Stop()
		t.Fatalf("starting envtest control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping envtest: %v", err)
		}
	})
	return env, cfg
}

// startTimeout is how long each control-plane process may take to answer
// ready. envtest's 20 s default is too short on a loaded machine: the race
// pass of make test starts several API servers with -race binaries beside
// PostgreSQL, and a CI run failed with "timeout waiting for process
// kube-apiserver to start" at load 19. Waiting longer costs nothing on a
// quiet machine. KUBEBUILDER_CONTROLPLANE_START_TIMEOUT, envtest's own
// variable, still wins when set.
func startTimeout() time.Duration {
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") != "" {
		return 0 // envtest reads the variable itself
	}
	return 2 * time.Minute
}
