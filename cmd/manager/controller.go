package main

import (
	"fmt"
	"os"
)

// runController is being implemented (placeholder so the binary builds).
func runController(args []string) int {
	fmt.Fprintln(os.Stderr, "manager controller: not implemented yet")
	return 2
}
