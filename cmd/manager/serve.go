package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/engram-dev/engram/internal/server"
)

// runServe is `manager serve`: the memory service of one tenant. SIGTERM
// (the kubelet) and SIGINT start a graceful shutdown.
func runServe(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return server.Main(ctx, args, os.Getenv, os.Stderr)
}
