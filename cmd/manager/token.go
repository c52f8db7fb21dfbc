package main

import (
	"os"
	"time"

	"github.com/engram-dev/engram/internal/auth"
)

// runToken is `manager token`: mint a signed agent token with a runtime's
// signing key, or generate a line for its tokens Secret.
func runToken(args []string) int {
	return auth.Main(args, os.Stdout, os.Stderr, time.Now)
}
