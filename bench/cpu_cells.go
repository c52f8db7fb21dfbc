package main

import (
	"context"
	"fmt"
	"time"
)

// sideMeters are the CPU meters of a cell's sides: the service side counts
// `manager serve` and the tenant database's backends; the raw side (and
// the ceiling) the backends only. Both count the harness (cpu.go).
type sideMeters struct{ service, raw cpuMeter }

// pair measures the service and raw sides of w at concurrency c in
// alternating slices, with the CPU of each side's processes.
func (m sideMeters) pair(ctx context.Context, sc Scale, w workload, c int) Workload {
	res := meteredRuns(ctx, c, sc.RunDuration, sc.Rounds, sc.MaxOpsPerRun,
		meteredSide{op: w.service(c), meter: m.service}, meteredSide{op: w.raw(c), meter: m.raw})
	return Workload{Name: w.name, Concurrency: c, Service: res[0].stats, Raw: res[1].stats,
		Ratio: ratio(res[0].stats.Throughput, res[1].stats.Throughput), ServiceCPU: &res[0].cpu, RawCPU: &res[1].cpu}
}

// cpuLine is the CPU per operation of a cell's sides for the log.
func (w Workload) cpuLine() string {
	if w.ServiceCPU == nil || w.RawCPU == nil {
		return "cpu -"
	}
	s := fmt.Sprintf("cpu ms/op: serve %.3f db %.3f harness %.3f | raw db %.3f harness %.3f",
		w.ServiceCPU.ServiceMs, w.ServiceCPU.DatabaseMs, w.ServiceCPU.HarnessMs, w.RawCPU.DatabaseMs, w.RawCPU.HarnessMs)
	if c := w.CeilingCPU; c != nil {
		s += fmt.Sprintf(" | ceiling db %.3f harness %.3f", c.DatabaseMs, c.HarnessMs)
	}
	return s
}

// cellDuration is how long meteredRuns of sides sides takes: the warm-up
// of each side and its measured time.
func cellDuration(sc Scale, sides int) time.Duration {
	return time.Duration(sides) * (sc.RunDuration + min(sc.RunDuration/4, time.Second))
}

// cpuCell renders one side's CPU per operation for a table: "serve / db /
// harness" in ms (serve is "-" on a side without a service).
func cpuCell(c *CPUPerOp, service bool) string {
	if c == nil {
		return "-"
	}
	if !service {
		return fmt.Sprintf("- / %.3f / %.3f", c.DatabaseMs, c.HarnessMs)
	}
	return fmt.Sprintf("%.3f / %.3f / %.3f", c.ServiceMs, c.DatabaseMs, c.HarnessMs)
}

// cpuCols are the serve and harness CPU columns of a service side.
func cpuCols(c *CPUPerOp) (serve, harness string) {
	if c == nil {
		return "-", "-"
	}
	return fmt.Sprintf("%.3f", c.ServiceMs), fmt.Sprintf("%.3f", c.HarnessMs)
}

// cpuMarkdown is the table of CPU per operation of every side of every
// cell: `manager serve`, the tenant database's backends, and the harness.
func cpuMarkdown(p printer, ws []Workload) {
	p("\nCPU per operation over each side's slices of the cell, in ms: `manager serve` / PostgreSQL backends of the tenant database / the harness (load generator). " +
		"From /proc/<pid>/stat before and after each slice; they hold across machines of this kind where throughput does not (docs/performance.md).\n\n")
	p("| workload | c | service | raw | ceiling |\n|---|---|---|---|---|\n")
	for _, w := range ws {
		if w.ServiceCPU == nil {
			continue
		}
		p("| %s | %d | %s | %s | %s |\n", w.Name, w.Concurrency, cpuCell(w.ServiceCPU, true), cpuCell(w.RawCPU, false), cpuCell(w.CeilingCPU, false))
	}
	p("\n")
}
