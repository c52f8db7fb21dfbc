// Command kubectl-engram is the kubectl plugin of Engram: `kubectl engram
// status`, run-now, rotate-credentials, pause/resume, and the memory
// service's owner routes. Install with `go install ./cmd/kubectl-engram`
// (or krew, plugins/engram.yaml); see docs/operations.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/engram-dev/engram/internal/kubectlengram"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlengram.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
