package main

import (
	"context"
	"os"

	"github.com/engram-dev/engram/internal/server"
)

// runServe is `manager serve`: the memory service of one tenant. SIGTERM
// (the kubelet) and SIGINT start a graceful shutdown.
func runServe(args []string) int {
	return untilSignalled(func(ctx context.Context) int {
		return server.Main(ctx, args, os.Getenv, os.Stderr)
	})
}
