package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// untilSignalled runs a subcommand with a context that SIGTERM (the
// kubelet, a Job's activeDeadlineSeconds) and SIGINT cancel.
func untilSignalled(run func(ctx context.Context) int) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx)
}
