// Command pause is the sandbox ("pause") container of the node that
// hack/cluster.sh runs: it holds a Pod's namespaces open and does nothing
// else. The upstream image comes from a registry this machine cannot reach,
// so the script builds this one (a static binary in a one-layer image).
//
// As PID 1 of a Pod that shares its process namespace it must reap the
// orphans its containers leave, and it exits on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
