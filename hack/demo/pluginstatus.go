package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/engram-dev/engram/internal/demo"
)

// printPluginStatus ends `make demo` with `kubectl engram status` of the
// demo tenant (and of the tenant on Citus, whose worker it shows, and of
// the re-embedded copy, whose re-embed it shows), run as the built plugin binary (bin/kubectl-engram, next to
// bin/manager; make build builds both). The memory counts come through
// --url: the demo's API server has no pod network to reach the service
// through its service proxy.
func printPluginStatus(cfg config, st *state, r *demo.Report) error {
	plugin := filepath.Join(filepath.Dir(cfg.binary), "kubectl-engram")
	if _, err := os.Stat(plugin); err != nil {
		return fmt.Errorf("%s is missing: run make build (make demo does)", plugin)
	}
	tenants := [][2]string{{r.Runtime, r.LocalEndpoint}}
	if c := r.Citus; c != nil {
		tenants = append(tenants, [2]string{c.Runtime, c.LocalEndpoint}) // shows its Citus worker
	}
	if re := r.Reembed; re != nil {
		tenants = append(tenants, [2]string{re.Runtime, re.LocalEndpoint}) // shows its re-embed
	}
	for _, tn := range tenants {
		args := []string{"status", tn[0], "--kubeconfig", st.Kubeconfig, "-n", demo.Namespace, "--url", tn[1]}
		fmt.Printf("\n== kubectl engram status %s -n %s --url %s\n\n", tn[0], demo.Namespace, tn[1])
		cmd := exec.Command(plugin, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("running %s %v: %w", plugin, args, err)
		}
	}
	fmt.Printf("\n   (put %s on your PATH to call it as kubectl engram)\n", filepath.Dir(plugin))
	return nil
}
