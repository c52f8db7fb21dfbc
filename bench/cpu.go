package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU time of the processes that serve one side of a comparison, read from
// /proc: the `manager serve` process, and the PostgreSQL backends of the
// side's database on every node (PostgreSQL titles each backend
// "postgres: <role> <database> <client> <state>"). Background processes
// (WAL writer, checkpointer, autovacuum) are not counted: they serve every
// database of a server alike. The servers must run on this machine (they
// do under make bench); elsewhere the readings are 0.

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuMeter names the processes of one side.
type cpuMeter struct {
	servicePID int
	database   string
	// coordinatorPort is the port of the Citus coordinator (0 on plain
	// PostgreSQL): its backends are told apart from the workers' by the
	// port their postmaster listens on.
	coordinatorPort int
}

// cpuReading is the CPU seconds used so far, per process: the service, the
// harness itself (the load generator: its HTTP or pgx clients, the load
// loop, the meter), and each backend with the port of its server.
type cpuReading struct {
	service  float64
	harness  float64
	backends map[int]backendCPU // by pid
}

type backendCPU struct {
	port    int
	seconds float64
}

// CPUPerOp is the CPU milliseconds one operation cost, by process.
type CPUPerOp struct {
	// ServiceMs is the `manager serve` process.
	ServiceMs float64 `json:"serviceMs"`
	// DatabaseMs is every backend of the side's database, on every node.
	DatabaseMs float64 `json:"databaseMs"`
	// CoordinatorMs and WorkersMs split DatabaseMs on Citus.
	CoordinatorMs float64 `json:"coordinatorMs,omitempty"`
	WorkersMs     float64 `json:"workersMs,omitempty"`
	// HarnessMs is the load generator (this process) over the side's
	// slices: its client path for the side (HTTP and JSON for a service,
	// pgx for raw SQL), the load loop, and the meter's own reads of /proc.
	// It runs on the same cores, so a side whose client costs more leaves
	// less CPU to the process measured.
	HarnessMs float64 `json:"harnessMs"`
}

// TotalMs is the service and the database together.
func (c CPUPerOp) TotalMs() float64 { return round3(c.ServiceMs + c.DatabaseMs) }

func (m cpuMeter) read() cpuReading {
	r := cpuReading{backends: map[int]backendCPU{}}
	r.service, _ = procCPU(m.servicePID)
	r.harness, _ = procCPU(os.Getpid())
	if m.database == "" {
		return r
	}
	ports := map[int]int{} // postmaster pid -> port
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		title, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		f := strings.Fields(strings.ReplaceAll(string(title), "\x00", " "))
		if len(f) < 3 || f[0] != "postgres:" || f[2] != m.database {
			continue
		}
		st, err := procStat(pid)
		if err != nil {
			continue
		}
		port, ok := ports[st.ppid]
		if !ok {
			port = postmasterPort(st.ppid)
			ports[st.ppid] = port
		}
		r.backends[pid] = backendCPU{port: port, seconds: st.cpu}
	}
	return r
}

// since is the CPU used between before and r. A backend that started in
// between counts whole; one that ended in between is lost (the pools of
// both sides keep their connections, so that is rare).
func (r cpuReading) since(before cpuReading, coordinatorPort int) cpuTotals {
	t := cpuTotals{service: r.service - before.service, harness: r.harness - before.harness}
	for pid, b := range r.backends {
		d := b.seconds - before.backends[pid].seconds
		if coordinatorPort != 0 && b.port != coordinatorPort {
			t.workers += d
		} else {
			t.coordinator += d
		}
	}
	return t
}

// cpuTotals accumulates CPU seconds over the slices of one side.
type cpuTotals struct{ service, coordinator, workers, harness float64 }

func (t *cpuTotals) add(o cpuTotals) {
	t.service += o.service
	t.coordinator += o.coordinator
	t.workers += o.workers
	t.harness += o.harness
}

// perOp divides by ops; citus says whether to split coordinator and workers.
func (t cpuTotals) perOp(ops int, citus bool) CPUPerOp {
	if ops == 0 {
		return CPUPerOp{}
	}
	ms := func(s float64) float64 { return round3(s * 1000 / float64(ops)) }
	out := CPUPerOp{ServiceMs: ms(t.service), DatabaseMs: ms(t.coordinator + t.workers), HarnessMs: ms(t.harness)}
	if citus {
		out.CoordinatorMs, out.WorkersMs = ms(t.coordinator), ms(t.workers)
	}
	return out
}

type statLine struct {
	ppid int
	cpu  float64 // utime + stime, seconds
}

// procStat reads the parent and the CPU time of pid.
func procStat(pid int) (statLine, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return statLine{}, err
	}
	// The command may contain spaces and parentheses: fields start after
	// the last ')'. Then: state ppid ... utime (the 12th) stime (13th).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return statLine{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return statLine{ppid: ppid, cpu: (ut + st) / clockTicks}, nil
}

func procCPU(pid int) (float64, error) {
	if pid <= 0 {
		return 0, nil
	}
	st, err := procStat(pid)
	return st.cpu, err
}

// postmasterPort reads "-p PORT" from a postmaster's command line (both
// hack/pgvector.sh and hack/citus.sh start them so), or 0.
func postmasterPort(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0
	}
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "-p" && i+1 < len(args) {
			p, _ := strconv.Atoi(args[i+1])
			return p
		}
	}
	return 0
}

// meteredSide is one side of meteredRuns.
type meteredSide struct {
	op    opFunc
	meter cpuMeter
}

// meteredResult is one side's outcome: throughput and latency, and the CPU
// its processes used per operation.
type meteredResult struct {
	stats RunStats
	cpu   CPUPerOp
}

// meteredRuns measures implementations of the same work in alternating
// slices (a, b, c, a, b, c, ...) after a short warm-up of each, so that
// noise from other processes on a shared machine hits every side alike and
// their ratios hold even when the absolute figures move. Each side carries
// a CPU meter: the CPU its processes used is summed over its slices only.
func meteredRuns(ctx context.Context, conc int, dur time.Duration, rounds, maxOps int, sides ...meteredSide) []meteredResult {
	warm := min(dur/4, time.Second)
	for _, s := range sides {
		runLoad(ctx, conc, warm, maxOps, s.op)
	}
	samples := make([]sample, len(sides))
	totals := make([]cpuTotals, len(sides))
	slice := dur / time.Duration(rounds)
	perRound := max(maxOps/rounds, 1)
	for range rounds {
		for i, s := range sides {
			before := s.meter.read()
			samples[i].merge(runLoad(ctx, conc, slice, perRound, s.op))
			totals[i].add(s.meter.read().since(before, s.meter.coordinatorPort))
		}
	}
	out := make([]meteredResult, len(sides))
	for i, s := range samples {
		st := s.stats()
		out[i] = meteredResult{stats: st, cpu: totals[i].perOp(st.Ops, sides[i].meter.coordinatorPort != 0)}
	}
	return out
}
