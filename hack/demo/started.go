package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// markIfStopped leaves a marker file (cfg.path(marker)) when `script
// status` says what the script runs is not running yet, so that the demo,
// which starts it next, stops it again at demo-down; what ran before the
// demo is left alone.
func markIfStopped(cfg config, script, marker string) error {
	if exec.Command(filepath.Join(cfg.repoRoot, script), "status").Run() == nil {
		return nil
	}
	return os.WriteFile(cfg.path(marker), nil, 0o600)
}

// stopIfStarted runs `script action` when the demo started what it runs
// (markIfStopped's marker is there) and drops the marker once it stopped.
// It reports whether the demo had started it; what names it in the output.
func stopIfStarted(cfg config, marker, script, action, what string) (bool, error) {
	if _, err := os.Stat(cfg.path(marker)); err != nil {
		return false, nil //nolint:nilerr // no marker (or none readable): the demo did not start it, nothing to stop
	}
	fmt.Printf("stopping %s (%s %s)\n", what, script, action)
	cmd := exec.Command(filepath.Join(cfg.repoRoot, script), action)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return true, fmt.Errorf("stopping %s: %w", what, err)
	}
	_ = os.Remove(cfg.path(marker))
	return true, nil
}

// localServer is a database server of the demo: the one an environment
// variable names, else the local one a hack/ script starts, which
// demo-down stops again when the demo started it.
type localServer struct {
	name, env, script, marker string
	about                     string // what the script runs, said when starting it
}

var (
	postgresServer = localServer{name: "PostgreSQL", env: "DATABASE_URL", script: "hack/pgvector.sh",
		marker: "postgres-started-by-demo", about: "PostgreSQL 17 + pgvector"}
	citusServer = localServer{name: "Citus", env: "CITUS_URL", script: "hack/citus.sh",
		marker: "citus-started-by-demo", about: "Citus 13 + pgvector, a coordinator and two workers (the first run builds it, then cached)"}
)

// url returns the server's URL, starting the local one when the
// environment names none.
func (s localServer) url(cfg config) (string, error) {
	if u := os.Getenv(s.env); u != "" {
		fmt.Printf(">> %s: using %s\n", s.name, s.env)
		return u, nil
	}
	fmt.Printf(">> %s (%s)\n", s.about, s.script)
	if err := markIfStopped(cfg, s.script, s.marker); err != nil {
		return "", err
	}
	return runScript(cfg, s.script, "start")
}

// stop stops the local server when the demo started it.
func (s localServer) stop(cfg config) error {
	_, err := stopIfStarted(cfg, s.marker, s.script, "stop", "the "+s.name+" the demo started")
	return err
}
