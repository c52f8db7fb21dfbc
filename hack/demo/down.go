package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// supervisorPID returns the pid of the supervisor and whether it runs.
func supervisorPID(cfg config) (int, bool) {
	b, err := os.ReadFile(cfg.path("supervisor.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processAlive(pid) && isSupervisor(pid)
}

func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil && !zombie(pid) }

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// isSupervisor guards against a recycled pid: the process must be this
// program running "supervise".
func isSupervisor(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "supervise")
}

// down stops the supervisor (which stops the services, the operator and the
// control plane in order), kills its whole session if it does not stop in
// time, and stops PostgreSQL and the Citus cluster if the demo started
// them (hack/pgvector.sh stop, hack/citus.sh stop: by PID, nothing else).
func down(cfg config) error {
	var errs []error
	if _, err := os.Stat(cfg.path(nodeMarker)); err == nil {
		errs = append(errs, downNode(cfg))
	}
	if pid, alive := supervisorPID(cfg); alive {
		fmt.Printf("stopping the demo environment (supervisor pid %d)\n", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if !waitExit(pid, 40*time.Second) {
			fmt.Println("the supervisor did not stop in time: killing its process group")
		}
		// Whatever is left of its session (etcd, kube-apiserver, services).
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	} else {
		fmt.Println("no demo environment is running")
	}
	killOrphans(cfg)
	errs = append(errs, postgresServer.stop(cfg), citusServer.stop(cfg))
	for _, f := range []string{"supervisor.pid", "state.json", "kubeconfig"} {
		_ = os.Remove(cfg.path(f))
	}
	_ = os.RemoveAll(cfg.path("pods"))
	return errors.Join(errs...)
}

// killOrphans kills processes still running a binary from the demo's pod
// directory or the envtest cache with the demo's state dir in their
// arguments — leftovers of a supervisor that was killed hard.
func killOrphans(cfg config) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if !strings.Contains(cmdline, cfg.path("pods")) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid != os.Getpid() {
			fmt.Printf("killing leftover process %d\n", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func waitExit(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func status(cfg config) error {
	if kc, err := os.ReadFile(cfg.path(nodeMarker)); err == nil {
		fmt.Printf("the demo runs on the node of hack/cluster.sh (kubeconfig %s)\n", kc)
		cmd := exec.Command(filepath.Join(cfg.repoRoot, "hack/cluster.sh"), "status")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return &exitError{code: 1}
		}
		return nil
	}
	pid, alive := supervisorPID(cfg)
	if !alive {
		fmt.Println("the demo environment is not running")
		return &exitError{code: 1}
	}
	st, err := readState(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("running (supervisor pid %d)\n  kube-apiserver %s\n  kubeconfig     %s\n", pid, st.APIServer, st.Kubeconfig)
	if st.CitusURL != "" {
		fmt.Printf("  Citus          coordinator %s\n", hostOf(st.CitusURL))
	}
	for k, v := range st.Endpoints {
		fmt.Printf("  service %-20s %s\n", k, v)
	}
	return nil
}

// hostOf is the host:port of a database URL (never its password).
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return "?"
}
