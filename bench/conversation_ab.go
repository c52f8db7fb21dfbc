package main

import (
	"context"
	"fmt"
)

// convAB is a second `manager serve` (--ab-manager) on the conversation
// tenant: each cell measures it in the same alternating slices as the
// first build and raw SQL (A, raw, B, A, raw, B, ...), so a change to the
// service is measured against the build without it under the same load
// (the issue 32 method: the machine's load moves both alike). Its figures
// go to the log ("service B"), not to the report. nil: no second build.
// Swap the builds in a second run: the slot after raw measured up to ~10 %
// cheaper for the same code on 2 shared cores (docs/performance.md).
type convAB struct {
	svc       *benchService
	meter     cpuMeter
	workloads []workload
}

// startConvAB starts the second build when --ab-manager names one.
func startConvAB(ctx context.Context, h *harness, loginURL string, a *benchService, dbName string, raw *rawConversation) (*convAB, error) {
	if h.abManagerBin == "" {
		return nil, nil
	}
	svc, err := startServiceBin(ctx, h, h.abManagerBin, "service-conv-b", loginURL, benchServiceConfig(benchPolicy(), false))
	if err != nil {
		return nil, fmt.Errorf("starting --ab-manager %s: %w", h.abManagerBin, err)
	}
	h.logf("conversation: A/B: service A %s (pid %d), service B %s (pid %d)", h.managerBin, a.proc.pid(), h.abManagerBin, svc.proc.pid())
	ab := &convAB{svc: svc, meter: cpuMeter{servicePID: svc.proc.pid(), database: dbName}}
	ab.workloads = h.conversationWorkloads(ctx, svc.api, raw)
	return ab, nil
}

func (ab *convAB) stop() {
	if ab != nil {
		ab.svc.stop()
	}
}

// pair measures workload w (number i) at concurrency c: service and raw as
// sideMeters.pair does, and with a second build service B in the same
// slices, logged beside them.
func (ab *convAB) pair(ctx context.Context, h *harness, m sideMeters, w workload, i, c int) Workload {
	sc := h.scale
	if ab == nil {
		return m.pair(ctx, sc, w, c)
	}
	res := meteredRuns(ctx, c, sc.RunDuration, sc.Rounds, sc.MaxOpsPerRun,
		meteredSide{op: w.service(c), meter: m.service}, meteredSide{op: w.raw(c), meter: m.raw},
		meteredSide{op: ab.workloads[i].service(c), meter: ab.meter})
	wl := Workload{Name: w.name, Concurrency: c, Service: res[0].stats, Raw: res[1].stats,
		Ratio: ratio(res[0].stats.Throughput, res[1].stats.Throughput), ServiceCPU: &res[0].cpu, RawCPU: &res[1].cpu}
	b := res[2]
	h.logf("conversation: %-16s c=%d  A/B: serve ms/op A %.3f B %.3f (B/A %.3f) | ratio to raw A %.2f B %.2f | B %7.1f/s p50 %6.2fms p99 %6.2fms, %d errors | load %s",
		w.name, c, res[0].cpu.ServiceMs, b.cpu.ServiceMs, ratio(b.cpu.ServiceMs, res[0].cpu.ServiceMs), wl.Ratio,
		ratio(b.stats.Throughput, res[1].stats.Throughput), b.stats.Throughput, b.stats.Latency.P50, b.stats.Latency.P99, b.stats.Errors, loadAvg())
	return wl
}
