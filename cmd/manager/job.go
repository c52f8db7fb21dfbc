package main

import (
	"context"
	"os"

	"github.com/engram-dev/engram/internal/jobrun"
)

// runJob is `manager job`: one maintenance run of one tenant. SIGTERM (the
// Job's activeDeadlineSeconds) cancels the running statement, so a Failed
// summary is still written before the kubelet kills the container.
func runJob(args []string) int {
	return untilSignalled(func(ctx context.Context) int {
		return jobrun.Main(ctx, args, os.Getenv, os.Stdout, os.Stderr)
	})
}
