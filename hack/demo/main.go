// Command engram-demo runs Engram end to end on one machine (`make demo`):
//
//	engram-demo up      start (or reuse) the background supervisor, then play the scenario
//	engram-demo up --node  the same story on the real node of hack/cluster.sh (node.go)
//	engram-demo down    stop everything the demo started (`make demo-down`)
//	engram-demo status  say what runs
//
// The supervisor is a background process in its own session: it runs the
// kube-apiserver + etcd (built by hack/envtest.sh), the operator and the
// local pod runner, and stays up after `up` returns so the service can be
// explored with kubectl and curl. PostgreSQL (hack/pgvector.sh) and the
// Citus cluster (hack/citus.sh; --citus=false leaves it out) run on their
// own and are stopped by `down` when `up` started them. State lives in
// $ENGRAM_CACHE/demo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: engram-demo up|down|status [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	cfg := config{}
	fs.StringVar(&cfg.repoRoot, "repo-root", ".", "root of the Engram checkout")
	fs.StringVar(&cfg.binary, "binary", "bin/manager", "the manager binary that stands in for the image")
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir(), "where the demo keeps its state, logs and kubeconfig")
	fs.BoolVar(&cfg.node, "node", false, "run on the real node of hack/cluster.sh (make demo-node) instead of the local pod runner")
	fs.StringVar(&cfg.imageTar, "image-tar", "dist/image/engram-docker-amd64.tar", "with --node: the image tarball make image wrote")
	fs.StringVar(&cfg.image, "image", "ghcr.io/engram-dev/engram:dev", "with --node: the image reference in that tarball")
	fs.StringVar(&cfg.helm, "helm", "bin/helm", "with --node: the helm binary")
	fs.BoolVar(&cfg.citus, "citus", true, "also start the local Citus cluster (hack/citus.sh, or CITUS_URL) and put a second tenant on it")
	_ = fs.Parse(os.Args[2:])
	cfg.absolutize()

	if os.Args[1] != "supervise" {
		// The operator in the supervisor sets its own logger; here only the
		// client logs, and a cold first run takes longer than the 30 s after
		// which controller-runtime complains, with a stack trace, that no
		// logger was set.
		ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}

	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "up":
		if cfg.node {
			err = upNode(ctx, cfg)
		} else {
			err = up(ctx, cfg)
		}
	case "down":
		err = down(cfg)
	case "status":
		err = status(cfg)
	case "supervise":
		err = supervise(ctx, cfg)
	default:
		err = fmt.Errorf("unknown command %q (up, down, status)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "engram-demo %s: %v\n", os.Args[1], err)
		var exit *exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		os.Exit(1)
	}
}

type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// config is shared by every command.
type config struct {
	repoRoot, binary, stateDir string
	// the node mode (node.go)
	node                  bool
	imageTar, image, helm string
	citus                 bool
}

func (c *config) absolutize() {
	for _, p := range []*string{&c.repoRoot, &c.binary, &c.stateDir, &c.imageTar, &c.helm} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
}

func (c config) path(name string) string { return filepath.Join(c.stateDir, name) }

func defaultStateDir() string {
	if d := os.Getenv("ENGRAM_CACHE"); d != "" {
		return filepath.Join(d, "demo")
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "engram", "demo")
}
