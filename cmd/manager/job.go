package main

import (
	"fmt"
	"os"
)

// runJob is being implemented (placeholder so the binary builds).
func runJob(args []string) int {
	fmt.Fprintln(os.Stderr, "manager job: not implemented yet")
	return 2
}
