package main

import (
	"fmt"
	"os"
)

// runServe is being implemented (placeholder so the binary builds).
func runServe(args []string) int {
	fmt.Fprintln(os.Stderr, "manager serve: not implemented yet")
	return 2
}
