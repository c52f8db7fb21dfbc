package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/engram-dev/engram/internal/localpod"
	"github.com/engram-dev/engram/internal/memory"
)

// OperatorReport is the operator part of the results.
type OperatorReport struct {
	Runtimes   int `json:"runtimes"`
	Namespaces int `json:"namespaces"`
	// How the operator ran and how its memory was read.
	Process string `json:"process"`
	// CreateSec is the time the harness took to create all runtimes.
	CreateSec float64 `json:"createSec"`
	// Ready runtimes and the time from the first create to the last Ready.
	Ready    int     `json:"ready"`
	AllReady bool    `json:"allReady"`
	ReadySec float64 `json:"readySec"`
	// ReadyLatency is, per runtime, the time from its create to its Ready.
	ReadyLatency Latency `json:"readyLatency"`
	// DeploymentStatusPatches were made by the harness standing in for the
	// deployment controller (envtest has none).
	DeploymentStatusPatches int64 `json:"deploymentStatusPatches"`
	// Reconciles of the MemoryRuntime controller per runtime, until all were
	// Ready and until the end of the idle window; ReconcilesByResult at the end.
	ReconcilesPerRuntimeAtReady float64        `json:"reconcilesPerRuntimeAtReady"`
	ReconcilesPerRuntime        float64        `json:"reconcilesPerRuntime"`
	ReconcilesByResult          map[string]int `json:"reconcilesByResult"`
	// SettleSec passed between all Ready and the start of the idle window,
	// with SettleWrites operator writes in it.
	SettleSec    float64 `json:"settleSec"`
	SettleWrites int     `json:"settleWrites"`
	// Over the idle window: write requests the operator sent (its client's
	// rest_client_requests_total by method) and reconciles it ran.
	IdleWindowSec      float64        `json:"idleWindowSec"`
	IdleWrites         int            `json:"idleWrites"`
	IdleWritesByMethod map[string]int `json:"idleWritesByMethod"`
	IdleReconciles     int            `json:"idleReconciles"`
	IdleStandInPatches int64          `json:"idleStandInPatches"`
	// IdleWriteDetails are the operator's writes in the idle window from the
	// API server's audit log ("verb resource namespace/name (code)"), at most 20.
	IdleWriteDetails       []string       `json:"idleWriteDetails,omitempty"`
	IdleAPIServerWrites    map[string]int `json:"idleApiServerWrites"`
	IdleAPIServerWritesAll int            `json:"idleApiServerWritesAll"`
	// Peak (VmHWM) and final (VmRSS) resident memory of the operator process.
	ManagerPeakRSSMiB float64 `json:"managerPeakRssMiB"`
	ManagerRSSMiB     float64 `json:"managerRssMiB"`
	// Concurrency is the operator's --max-concurrent-reconciles-runtime
	// (0: the operator's default).
	Concurrency int `json:"concurrency"`
	// ReadyTimeline is how many runtimes were Ready at each 10-s look.
	ReadyTimeline []int `json:"readyTimeline"`
	// OperatorCPUSec is the operator process's CPU (user + system) from
	// the first create to the last Ready, and per reconcile in that time.
	OperatorCPUSec    float64 `json:"operatorCpuSec"`
	CPUPerReconcileMs float64 `json:"cpuPerReconcileMs"`
	// Provisionings that succeeded until all were Ready, and their mean time
	// in PostgreSQL (engram_operator_provision_duration_seconds).
	Provisionings   int     `json:"provisionings"`
	ProvisionMeanMs float64 `json:"provisionMeanMs"`
	// PeakDBConnections is the most sessions the operator's database had
	// at once while the runtimes were provisioned (pg_stat_activity, read
	// every 500 ms), against DBConnectionBound.
	PeakDBConnections int    `json:"peakDbConnections"`
	DBConnectionBound string `json:"dbConnectionBound"`
}

// dbConnectionBound says what bounds the operator's sessions on one
// database: a pool of 4 per admin connection (each namespace of the
// harness has a connection Secret of its own), one blocker-watch session
// per provisioning that waits longer than a look, and the lock watchdog's
// session.
const dbConnectionBound = "4 per admin connection (one per namespace here) + 1 per provisioning waiting > 1 s + 1 for the lock watchdog"

const benchImage = "ghcr.io/engram-dev/engram:bench"

// runOperator runs the real operator binary against an envtest control
// plane and the real PostgreSQL, creates N MemoryRuntimes and measures how
// fast they get Ready and how quiet the operator is afterwards.
func (h *harness) runOperator(ctx context.Context) (*OperatorReport, error) {
	n := h.scale.Runtimes
	rep := &OperatorReport{Runtimes: n, Namespaces: namespacesFor(n), Concurrency: h.operatorConcurrency,
		Process:           "bin/manager as a separate process (" + concurrencyNote(h.operatorConcurrency) + "); memory from /proc/<pid>/status VmHWM and VmRSS",
		DBConnectionBound: dbConnectionBound}
	db, err := createDatabase(ctx, h.serverURL, "op")
	if db != nil {
		defer h.dropDatabase("operator database", db)
	}
	if err != nil {
		return nil, err
	}
	env, cfg, c, err := h.controlPlane()
	if err != nil {
		return nil, err
	}
	defer h.cleanup("control plane", func() error { return stopControlPlane(env) })
	if err := prepareNamespaces(ctx, c, rep.Namespaces, db.URL); err != nil {
		return nil, err
	}
	op, metricsURL, err := h.startOperator(ctx, env)
	if err != nil {
		return nil, err
	}
	defer op.stop(30 * time.Second)

	sctx, stopStandIns := context.WithCancel(ctx)
	defer stopStandIns()
	standIn, tracker, err := startStandIns(sctx, cfg, c, n)
	if err != nil {
		return nil, err
	}

	h.logf("operator: creating %d MemoryRuntimes in %d namespaces", n, rep.Namespaces)
	conns := sampleConnections(ctx, h.serverURL, db.name, 500*time.Millisecond)
	cpuBefore, _ := procCPU(op.pid())
	start := time.Now()
	if err := createRuntimes(ctx, c, db, tracker, n, rep.Namespaces); err != nil {
		conns.finish()
		return nil, err
	}
	rep.CreateSec = round3(time.Since(start).Seconds())
	err = h.waitReady(ctx, op, tracker, rep)
	cpuAfter, _ := procCPU(op.pid())
	rep.PeakDBConnections = conns.finish()
	if err != nil {
		return nil, err
	}
	ready, lats, last := tracker.latencies()
	rep.Ready, rep.AllReady = ready, ready >= n
	rep.ReadySec = round3(last.Sub(start).Seconds())
	rep.ReadyLatency = summarize(lats)
	h.logf("operator: %d of %d Ready after %.1fs (per runtime p50 %.1fs, max %.1fs)", ready, n, rep.ReadySec, rep.ReadyLatency.P50/1000, rep.ReadyLatency.Max/1000)
	atReady, err := scrapeMetrics(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	rep.ReconcilesPerRuntimeAtReady = round3(reconciles(atReady) / float64(n))
	rep.OperatorCPUSec = round3(cpuAfter - cpuBefore)
	if r := reconciles(atReady); r > 0 {
		rep.CPUPerReconcileMs = round3(rep.OperatorCPUSec / r * 1000)
	}
	rep.Provisionings, rep.ProvisionMeanMs = provisionings(atReady)
	h.logf("operator: %.1f s CPU (%.1f ms per reconcile), %d provisionings of %.0f ms mean, at most %d database sessions",
		rep.OperatorCPUSec, rep.CPUPerReconcileMs, rep.Provisionings, rep.ProvisionMeanMs, rep.PeakDBConnections)

	if err := h.idle(ctx, op, cfg, c, metricsURL, standIn, rep); err != nil {
		return nil, err
	}
	rep.DeploymentStatusPatches = standIn.patches.Load()
	if peak, cur, err := memoryKiB(op.pid()); err == nil {
		rep.ManagerPeakRSSMiB, rep.ManagerRSSMiB = round3(float64(peak)/1024), round3(float64(cur)/1024)
	}
	h.logf("operator: %.1f reconciles per runtime, %d writes in %.0fs idle, peak RSS %.0f MiB",
		rep.ReconcilesPerRuntime, rep.IdleWrites, rep.IdleWindowSec, rep.ManagerPeakRSSMiB)
	return rep, nil
}

// startOperator starts `manager controller` with its own kubeconfig and
// waits until it is ready.
func (h *harness) startOperator(ctx context.Context, env *envtest.Environment) (*process, string, error) {
	kc, err := h.operatorKubeconfig(env)
	if err != nil {
		return nil, "", err
	}
	mport, err := localpod.FreePort()
	if err != nil {
		return nil, "", err
	}
	pport, err := localpod.FreePort()
	if err != nil {
		return nil, "", err
	}
	args := []string{"controller", "--kubeconfig=" + kc,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", mport), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", pport),
		"--service-image=" + benchImage, "--operator-namespace=" + operatorNamespace}
	if h.operatorConcurrency > 0 {
		args = append(args, fmt.Sprintf("--max-concurrent-reconciles-runtime=%d", h.operatorConcurrency))
	}
	p, err := startProcess("manager (operator)", h.managerBin, args, nil, filepath.Join(h.workDir, "operator.log"))
	if err != nil {
		return nil, "", err
	}
	if err := waitHTTP(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/readyz", pport), 60*time.Second); err != nil {
		p.stop(5 * time.Second)
		return nil, "", err
	}
	return p, fmt.Sprintf("http://127.0.0.1:%d/metrics", mport), nil
}

// concurrencyNote says how many MemoryRuntimes the operator reconciled at once.
func concurrencyNote(n int) string {
	if n > 0 {
		return fmt.Sprintf("--max-concurrent-reconciles-runtime=%d", n)
	}
	return "default flags"
}

// reconciles is the MemoryRuntime controller's reconcile count.
func reconciles(s scrape) float64 {
	return s.sum("controller_runtime_reconcile_total", func(l map[string]string) bool { return l["controller"] == "memoryruntime" })
}

// operatorWrites counts the write requests of the operator's client.
func operatorWrites(s scrape) map[string]float64 {
	return s.byLabel("rest_client_requests_total", "method", func(l map[string]string) bool { return writeVerbs[l["method"]] })
}

func sumValues[V int | float64](m map[string]V) V {
	var t V
	for _, v := range m {
		t += v
	}
	return t
}

// startStandIns starts the harness's watches: the deployment stand-in and
// the Ready tracker.
func startStandIns(ctx context.Context, cfg *rest.Config, c client.Client, n int) (*deploymentStandIn, *readyTracker, error) {
	ca, err := cache.New(cfg, cache.Options{Scheme: c.Scheme()})
	if err != nil {
		return nil, nil, err
	}
	standIn, err := newDeploymentStandIn(ctx, c, ca)
	if err != nil {
		return nil, nil, err
	}
	tracker, err := newReadyTracker(ctx, ca, n)
	if err != nil {
		return nil, nil, err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, nil, fmt.Errorf("the harness's caches did not sync")
	}
	go standIn.run(ctx, 4)
	return standIn, tracker, nil
}

// createRuntimes creates the runtimes with a few parallel clients, as a
// GitOps tool applying a directory would.
func createRuntimes(ctx context.Context, c client.Client, db *benchDB, tracker *readyTracker, n, nns int) error {
	for i := range n {
		db.tenantRoles(schemaOf(newRuntime(i, nns)))
	}
	return inParallel(n, func(i int) error {
		rt := newRuntime(i, nns)
		tracker.markCreated(client.ObjectKeyFromObject(rt), time.Now())
		if err := c.Create(ctx, rt); err != nil {
			return fmt.Errorf("creating %s/%s: %w", rt.Namespace, rt.Name, err)
		}
		return nil
	})
}

// waitReady waits until every runtime is Ready, the limit passes or the
// operator dies.
func (h *harness) waitReady(ctx context.Context, op *process, tracker *readyTracker, rep *OperatorReport) error {
	limit := time.After(h.scale.ReadyLimit)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tracker.all:
			return nil
		case <-limit:
			ready, _, _ := tracker.latencies()
			h.logf("operator: only %d of %d Ready after %s; going on with the idle measurement", ready, rep.Runtimes, h.scale.ReadyLimit)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := op.exited(); err != nil {
				return err
			}
			ready, _, _ := tracker.latencies()
			rep.ReadyTimeline = append(rep.ReadyTimeline, ready)
			h.logf("operator: %d of %d Ready", ready, rep.Runtimes)
		}
	}
}

// idle waits until the operator has stopped writing (bounded by Settle),
// then counts writes over the idle window.
func (h *harness) idle(ctx context.Context, op *process, cfg *rest.Config, c client.Client, metricsURL string, standIn *deploymentStandIn, rep *OperatorReport) error {
	settleStart := time.Now()
	first, err := scrapeMetrics(ctx, metricsURL)
	if err != nil {
		return err
	}
	prev := first
	for time.Since(settleStart) < h.scale.Settle {
		if err := memory.Sleep(ctx, 5*time.Second); err != nil {
			return err
		}
		cur, err := scrapeMetrics(ctx, metricsURL)
		if err != nil {
			return err
		}
		quiet := sumValues(operatorWrites(cur)) == sumValues(operatorWrites(prev))
		prev = cur
		if quiet {
			break
		}
	}
	rep.SettleSec = round3(time.Since(settleStart).Seconds())
	rep.SettleWrites = sumValues(delta(operatorWrites(first), operatorWrites(prev)))

	apiBefore, err := apiServerWrites(ctx, cfg)
	if err != nil {
		return err
	}
	patchesBefore := standIn.patches.Load()
	h.logf("operator: idle window of %s", h.scale.IdleWindow)
	t0 := time.Now()
	if err := memory.Sleep(ctx, h.scale.IdleWindow); err != nil {
		return err
	}
	if err := op.exited(); err != nil {
		return err
	}
	t1 := time.Now()
	rep.IdleWindowSec = round3(t1.Sub(t0).Seconds())
	after, err := scrapeMetrics(ctx, metricsURL)
	if err != nil {
		return err
	}
	apiAfter, err := apiServerWrites(ctx, cfg)
	if err != nil {
		return err
	}
	rep.IdleWritesByMethod = delta(operatorWrites(prev), operatorWrites(after))
	rep.IdleWrites = sumValues(rep.IdleWritesByMethod)
	rep.IdleReconciles = int(reconciles(after) - reconciles(prev))
	rep.IdleStandInPatches = standIn.patches.Load() - patchesBefore
	rep.IdleAPIServerWrites = delta(apiBefore, apiAfter)
	rep.IdleAPIServerWritesAll = sumValues(rep.IdleAPIServerWrites)
	// The audit log is written as requests complete: give the last ones a moment.
	time.Sleep(time.Second)
	audited, err := auditWrites(h.auditLog(), operatorUser, t0, t1)
	if err != nil {
		return err
	}
	rep.IdleWriteDetails = describeWrites(ctx, c, audited, 20)
	rep.ReconcilesPerRuntime = round3(reconciles(after) / float64(rep.Runtimes))
	rep.ReconcilesByResult = delta(nil, after.byLabel("controller_runtime_reconcile_total", "result",
		func(l map[string]string) bool { return l["controller"] == "memoryruntime" }))
	return nil
}

// apiServerWrites reads the API server's write requests of every client by
// "VERB resource[/subresource]" from its /metrics.
func apiServerWrites(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	s, err := parseMetrics(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return s.byKey("apiserver_request_total", func(l map[string]string) string {
		r := l["resource"]
		if l["subresource"] != "" {
			r += "/" + l["subresource"]
		}
		return l["verb"] + " " + r
	}, func(l map[string]string) bool { return writeVerbs[l["verb"]] }), nil
}
