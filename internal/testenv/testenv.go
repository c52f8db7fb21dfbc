// Package testenv gives tests the real parts a user has: a PostgreSQL server
// with pgvector (DATABASE_URL) and a kube-apiserver + etcd (KUBEBUILDER_ASSETS).
//
// `make test` provisions both and sets ENGRAM_TEST_REQUIRE_INFRA=1; then a
// missing part fails the test loudly. Outside `make test` (a plain `go test`)
// a missing part skips the test with a message saying how to provide it.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// RequireInfraEnv is set to 1 by `make test`: suites must not skip then.
const RequireInfraEnv = "ENGRAM_TEST_REQUIRE_INFRA"

// Required reports whether missing infrastructure must fail tests.
func Required() bool { return os.Getenv(RequireInfraEnv) == "1" }

// Missing fails the test under `make test` and skips it otherwise: what is
// the piece of infrastructure the test cannot find, how says how to get it.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is missing but %s=1 (make test): %s", what, RequireInfraEnv, how)
	}
	t.Skipf("%s is not available (%s); `make test` provisions it", what, how)
}

// requiredEnv returns the environment variable name, the address of a piece
// of infrastructure (what) a test needs, or fails/skips the test with how
// to provide it when it is not set (missing).
func requiredEnv(t testing.TB, name, what, how string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(t, what+" ("+name+")", how)
	}
	return v
}

// RepoRoot returns the directory holding the product's go.mod.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binary returns the path of a tool that `make test` builds and names in
// the environment variable env (helm, kustomize); missing fails the test
// under `make test` and skips it otherwise.
func Binary(t testing.TB, env, how string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		Missing(t, env, how)
		return ""
	}
	if _, err := os.Stat(path); err != nil {
		Missing(t, env+"="+path, how)
	}
	return path
}

// BuildManager builds ./cmd/manager into the test's temporary directory, for
// suites that run it as a process (the e2e flow, the fault suite).
func BuildManager(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the manager: %v\n%s", err, out)
	}
	return bin
}
