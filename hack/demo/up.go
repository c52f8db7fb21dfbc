package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// up makes sure the supervisor runs (starting PostgreSQL and building the
// control plane first when needed), then plays the scenario and prints a summary.
func up(ctx context.Context, cfg config) error {
	start := time.Now()
	if err := os.MkdirAll(cfg.stateDir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(cfg.binary); err != nil {
		return fmt.Errorf("%s is missing: run make build (make demo does)", cfg.binary)
	}
	st, err := ensureSupervisor(cfg)
	if err != nil {
		return err
	}
	restCfg, err := clientcmd.RESTConfigFromKubeConfig(mustRead(st.Kubeconfig))
	if err != nil {
		return fmt.Errorf("reading the demo kubeconfig: %w", err)
	}
	c, err := demo.NewClient(restCfg)
	if err != nil {
		return err
	}
	sc := &demo.Scenario{
		Client: c, Config: restCfg, Kubeconfig: st.Kubeconfig, Out: os.Stdout,
		SamplesDir: filepath.Join(cfg.repoRoot, "config", "samples"), Citus: st.CitusURL != "", Embedder: st.Embedder,
		Endpoint: func(ns, name string) string {
			if s, err := readState(cfg); err == nil {
				return s.Endpoints[ns+"/"+name]
			}
			return ""
		},
		// The demo's own namespace: a memory store an earlier demo left
		// (make demo-node before, a fresh control plane) is taken over.
		TakeOverEarlier: true,
	}
	report, err := sc.Run(ctx)
	if err != nil {
		fmt.Printf("\nThe demo failed. Logs: %s (operator, pod runner), %s (service and job processes).\nStop everything with: make demo-down\n",
			cfg.path("supervisor.log"), cfg.path("pods"))
		return err
	}
	printSummary(cfg, st, report, time.Since(start))
	return printPluginStatus(cfg, st, report)
}

// ensureSupervisor returns the state of a running supervisor, starting one
// (with PostgreSQL, Citus and the envtest binaries) when none runs.
func ensureSupervisor(cfg config) (*state, error) {
	if pid, alive := supervisorPID(cfg); alive {
		if st, err := readState(cfg); err == nil && st.Ready && st.PID == pid {
			fmt.Printf("Reusing the running demo environment (supervisor pid %d).\n", pid)
			if cfg.citus && st.CitusURL == "" {
				fmt.Println("It runs without Citus: make demo-down, then make demo, to add the tenant on Citus.")
			}
			return st, nil
		}
	}
	// PostgreSQL and Citus (mostly downloads and a build on a new machine)
	// and the control plane (mostly compiling) are prepared at the same time.
	type result struct {
		out string
		err error
	}
	pg, citus := make(chan result, 1), make(chan result, 1)
	go func() {
		u, err := databaseURL(cfg)
		pg <- result{u, err}
	}()
	go func() {
		u, err := citusURL(cfg)
		citus <- result{u, err}
	}()
	fmt.Println(">> kube-apiserver + etcd (built from Go modules once, then cached)")
	assets, err := runScript(cfg, "hack/envtest.sh")
	db, cu := <-pg, <-citus
	if err := errors.Join(err, db.err, cu.err); err != nil {
		return nil, err
	}
	dbURL := db.out
	_ = os.Remove(cfg.path("state.json"))
	logFile, err := os.Create(cfg.path("supervisor.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "supervise", "--repo-root", cfg.repoRoot, "--binary", cfg.binary, "--state-dir", cfg.stateDir)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "KUBEBUILDER_ASSETS="+assets, "CITUS_URL="+cu.out)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logFile, logFile, cfg.repoRoot
	// Its own session: Ctrl-C on `make demo` does not stop the environment;
	// `make demo-down` does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the supervisor: %w", err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(cfg.path("supervisor.pid"), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		return nil, err
	}
	_ = cmd.Process.Release()
	fmt.Printf(">> control plane, operator and local pod runner starting (pid %d, log %s)\n", pid, cfg.path("supervisor.log"))
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if st, err := readState(cfg); err == nil && st.PID == pid {
			if st.Error != "" {
				return nil, fmt.Errorf("the supervisor failed: %s (log %s)", st.Error, cfg.path("supervisor.log"))
			}
			if st.Ready {
				return st, nil
			}
		}
		if !processAlive(pid) {
			return nil, fmt.Errorf("the supervisor exited; its log %s ends with:\n%s", cfg.path("supervisor.log"), tail(cfg.path("supervisor.log"), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("the supervisor was not ready within 2 minutes (log %s)", cfg.path("supervisor.log"))
}

// databaseURL returns DATABASE_URL, or starts the local PostgreSQL.
func databaseURL(cfg config) (string, error) { return postgresServer.url(cfg) }

// citusURL returns CITUS_URL, or starts the local Citus cluster (a
// coordinator and two workers; built once into the cache); "" with
// --citus=false.
func citusURL(cfg config) (string, error) {
	if !cfg.citus {
		fmt.Println(">> Citus: left out (--citus=false)")
		return "", nil
	}
	return citusServer.url(cfg)
}

// runScript runs a hack/ script, streaming its stderr, and returns the last
// line of its stdout.
func runScript(cfg config, script string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(cfg.repoRoot, script), args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = &out, os.Stderr, cfg.repoRoot
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w", script, strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

func mustRead(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

func tail(path string, n int) string {
	lines := strings.Split(strings.TrimRight(string(mustRead(path)), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func printSummary(cfg config, st *state, r *demo.Report, took time.Duration) {
	fmt.Printf(`
== Done in %s. Everything keeps running.

   Kubernetes API   %s   (kube-apiserver + etcd, no kubelet: localpod runs the pods)
   kubeconfig       %s
   namespace        %s: memorypolicy, memoryruntime/%s, retentionjob
   PostgreSQL       schema %s (login role %s)
   memory service   %s   (in the cluster: %s)

Explore:
   export KUBECONFIG=%s
   kubectl get engram -n %s
   kubectl describe memoryruntime %s -n %s
   TOKEN=%s
   curl -s -H "Authorization: Bearer $TOKEN" %s/v1/owners/alice/memories
   curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{"query":"peanuts"}' %s/v1/owners/alice/search
   curl -s %s/openapi.json | head
   # an agent token bound to alice (signed with the runtime's key), refused a protected write:
   kubectl get secret -n %s %s -o jsonpath='{.data.signing-key}' | base64 -d > /tmp/engram-signing-key
   AGENT=$(%s token mint --signing-key-file /tmp/engram-signing-key --owner alice --subject support-bot/alice --ttl 15m)
   curl -s -H "Authorization: Bearer $AGENT" -H 'Content-Type: application/json' -d '{"content":"Alice eats peanuts","category":"identity"}' %s/v1/owners/alice/memories

%s%sLogs: %s and %s
Stop everything: make demo-down
`, took.Round(100*time.Millisecond), st.APIServer, st.Kubeconfig, demo.Namespace, r.Runtime, r.Schema, tenant.LoginRole(r.Schema),
		r.LocalEndpoint, r.ClusterEndpoint, st.Kubeconfig, demo.Namespace, r.Runtime, demo.Namespace, r.Token,
		r.LocalEndpoint, r.LocalEndpoint, r.LocalEndpoint, demo.Namespace, naming.APITokenSecretName(r.Runtime), cfg.binary, r.LocalEndpoint,
		transferSummary(r, demo.Namespace), citusSummary(r.Citus), cfg.path("supervisor.log"), cfg.path("pods"))
}

// transferSummary is the part of the summary about the runtime the
// tenant's export was imported into ("" without one).
func transferSummary(r *demo.Report, ns string) string {
	t := r.Transfer
	if t == nil {
		return ""
	}
	return fmt.Sprintf(`Export and import:
   memoryruntime/%s (schema %s) holds what the export of %s held (%d records)
   curl -s -H "Authorization: Bearer $TOKEN" %s/v1/export | head -1   # the header: embedder, policy, counts
   kubectl get secret -n %s %s -o jsonpath='{.data.tokens}' | base64 -d   # the copy's tokens
%s
`, t.Runtime, t.Schema, r.Runtime, sumCounts(t.Trailer), r.LocalEndpoint, ns, naming.APITokenSecretName(t.Runtime), reembedSummary(r.Reembed, ns))
}

// reembedSummary is the part of the summary about the model change ("" without one).
func reembedSummary(re *demo.ReembedReport, ns string) string {
	if re == nil {
		return ""
	}
	return fmt.Sprintf(`   memoryruntime/%s moved to %s: %d rows re-embedded, %d searches answered meanwhile (%d errors)
   kubectl engram status %s -n %s   # its embedder and the last re-embed
   kubectl get mrt %s -n %s -o jsonpath='{.status.reembed}'
`, re.Runtime, re.To.Model, re.Filled, re.SearchesDuring, re.SearchErrors, re.Runtime, ns, re.Runtime, ns)
}

func sumCounts(counts map[string]int64) int64 {
	var n int64
	for _, v := range counts {
		n += v
	}
	return n
}

// citusSummary is the part of the summary about the tenant on Citus ("" without one).
func citusSummary(c *demo.CitusReport) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf(`On Citus:
   memoryruntime/%s on MemoryDatabase %s (Citus %s, workers %s)
   schema %s on worker %s; memory service %s
   kubectl get memorydatabases; kubectl get mrt -n %s -o wide   # where each tenant lives
   kubectl annotate mrt %s -n %s memory.engram.dev/move-to-worker=<the other worker>   # move it online

`, c.Runtime, c.Database, c.Version, strings.Join(c.Workers, ", "), c.Schema, c.Worker, c.LocalEndpoint,
		demo.Namespace, c.Runtime, demo.Namespace)
}
