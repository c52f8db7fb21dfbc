package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/engram-dev/engram/internal/jobrun"
)

// runJob is `manager job`: one maintenance run of one tenant. SIGTERM (the
// Job's activeDeadlineSeconds) cancels the running statement, so a Failed
// summary is still written before the kubelet kills the container.
func runJob(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return jobrun.Main(ctx, args, os.Getenv, os.Stdout, os.Stderr)
}
