package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// The images the suite loads into the node; neither is pulled from anywhere
// (the chart and the overlay set pullPolicy Never).
const (
	imageRepo   = "ghcr.io/engram-dev/engram"
	imageTag    = "e2e"
	image       = imageRepo + ":" + imageTag
	clientImage = "localhost/engram/e2e-client:1"
)

// buildImages builds what `make image` builds (both platforms, hack/image)
// and the client image, loads them into the cluster, and returns the
// engram image's reference.
func buildImages(t *testing.T, cl *cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		bins[arch] = filepath.Join(dir, "linux_"+arch, "manager")
		goBuild(t, ctx, root, arch, bins[arch], "./cmd/manager")
	}
	run(t, ctx, filepath.Join(root, "hack", "image"), "go", "run", ".", "--binary-amd64", bins["amd64"], "--binary-arm64", bins["arm64"],
		"--out", filepath.Join(dir, "image"), "--tag", image, "--version", "v0.0.0-e2e")
	clientBin := filepath.Join(dir, "client")
	goBuild(t, ctx, root, "amd64", clientBin, "./test/node/client")
	clientTar := filepath.Join(dir, "client.tar")
	run(t, ctx, filepath.Join(root, "hack", "image"), "go", "run", ".", "static", "--binary", clientBin, "--tag", clientImage, "--out", clientTar)
	start := time.Now()
	if err := cl.loadImages(ctx, filepath.Join(dir, "image", "engram-docker-amd64.tar"), clientTar); err != nil {
		t.Fatalf("loading the images: %v", err)
	}
	t.Logf("images %s and %s loaded in %s", image, clientImage, time.Since(start).Round(100*time.Millisecond))
}

func goBuild(t *testing.T, ctx context.Context, root, arch, out, pkg string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s for linux/%s: %v\n%s", pkg, arch, err, b)
	}
}

func run(t *testing.T, ctx context.Context, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, b)
	}
}
