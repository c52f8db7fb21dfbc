package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/engram-dev/engram/internal/memory"
)

// Target is one goal of issue 7 with what this run measured. They are
// reported, not enforced: a benchmark on a shared machine is no test.
type Target struct {
	Name     string `json:"name"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
	// Gap is the relative shortfall (0 when met), to rank the misses.
	Gap  float64 `json:"gap"`
	Note string  `json:"note,omitempty"`
	// Check: a miss fails the run (exit status 1), not just the table.
	Check bool `json:"check,omitempty"`
}

const (
	goalSearchRatio = 0.7
	// goalCeilingRatio is issue 32's (issue 17 asked 0.5): on a quiet
	// machine; on a busy one the service shares the cores with the load.
	goalCeilingRatio = 0.75
	goalAddRatio     = 0.5
	goalSearchP99Ms  = 10.0
	goalWindowP99Ms  = 20.0
	// Issue 32: 1,000 runtimes all Ready within 30 s, each within 10 s
	// at p95; 5,000 within 150 s in 256 MiB.
	goalReadySec      = 30.0
	goalReadyP95Sec   = 10.0
	goalRuntimes      = 1000
	goalBigRuntimes   = 5000
	goalBigReadySec   = 150.0
	goalBigPeakRSSMiB = 256.0
	goalMemories      = 200_000
	// Issue 32: cost per operation and ratios in the same run.
	goalServeCPUPerSearchMs = 0.2  // `manager serve` CPU per vector search
	goalWindowRatio         = 0.6  // token and summary window, service/raw
	goalAppendRatio         = 0.65 // append turn, service/raw
	goalJobAddP99Factor     = 1.5  // add p99 during a job / alone
	goalCompactSec          = 20.0 // compact, 1M memories
	goalDecaySec            = 3.0  // decay, 1M memories (50k changed)
	goalJobRows             = 1_000_000
)

// targets compares the report with the goals.
func targets(rep *Report) []Target {
	var out []Target
	if s := rep.Service; s != nil {
		out = append(out, serviceTargets(s)...)
	}
	if c := rep.Conversation; c != nil {
		out = append(out, conversationTargets(c)...)
	}
	if o := rep.Operator; o != nil {
		out = append(out, operatorTargets(o)...)
	}
	if j := rep.Jobs; j != nil {
		out = append(out, jobTargets(j)...)
	}
	if t := rep.Transfer; t != nil {
		out = append(out, transferTarget(t))
	}
	if f := rep.Filters; f != nil {
		out = append(out, filterTargets(f)...)
	}
	if c := rep.ClientVectors; c != nil {
		out = append(out, clientVectorTargets(c)...)
	}
	if r := rep.Reembed; r != nil {
		out = append(out, reembedTargets(r)...)
	}
	if m := rep.Move; m != nil {
		out = append(out, moveTargets(m)...)
	}
	rep.LargestGap = largestGap(out)
	return out
}

func serviceTargets(s *ServiceReport) []Target {
	var out []Target
	scaleNote := ""
	if s.Memories < goalMemories {
		scaleNote = fmt.Sprintf("measured at %d memories (short mode); the goal is for 200,000", s.Memories)
	}
	for _, w := range s.Workloads {
		switch w.Name {
		case "vector search", "hybrid search":
			out = append(out, atLeast(fmt.Sprintf("%s service/raw throughput, c=%d", w.Name, w.Concurrency), w.Ratio, goalSearchRatio, ""))
			out = append(out, below(fmt.Sprintf("%s p99 through the service, c=%d", w.Name, w.Concurrency), w.Service.Latency.P99, goalSearchP99Ms, scaleNote))
		case "add (dedup)":
			out = append(out, atLeast(fmt.Sprintf("add service/raw throughput, c=%d", w.Concurrency), w.Ratio, goalAddRatio, ""))
		}
		if w.Name == "vector search" && w.ServiceCPU != nil {
			t := below(fmt.Sprintf("manager serve CPU per vector search, c=%d", w.Concurrency), w.ServiceCPU.ServiceMs, goalServeCPUPerSearchMs, "")
			t.Measured = fmt.Sprintf("%.3f ms", w.ServiceCPU.ServiceMs)
			out = append(out, t)
		}
	}
	out = append(out, throughputTargets(s.Workloads, scaleNote)...)
	out = append(out, scalingChecks(s.Workloads)...)
	out = append(out, citusTargets(s.Citus)...)
	q := s.Quality
	out = append(out, Target{Name: "recall@10 of service vector search vs brute force", Goal: "1.0",
		Measured: fmt.Sprintf("%.4f (min %.2f over %d queries)", q.RecallAt10, q.MinRecall, q.Queries),
		Met:      q.RecallAt10 >= 1 && q.Queries > 0, Gap: 1 - q.RecallAt10})
	small := Target{Name: "owners with < 10 memories get all of them", Goal: "all", Measured: "all", Met: q.SmallOwnersComplete}
	if !small.Met {
		small.Measured, small.Gap = fmt.Sprintf("%d problems", len(q.SmallOwnerProblems)), 1
		small.Note = fmt.Sprint(q.SmallOwnerProblems)
	}
	return append(out, small)
}

// throughputTargets are issue 17's goals for 200,000 memories.
func throughputTargets(ws []Workload, note string) []Target {
	goals := map[string]map[int]float64{
		"vector search": {1: 700, 4: 1400}, "hybrid search": {4: 700}, "context": {4: 500}, "add (dedup)": {4: 1000},
	}
	var out []Target
	for _, w := range ws {
		if g, ok := goals[w.Name][w.Concurrency]; ok {
			t := atLeast(fmt.Sprintf("%s through the service, c=%d (ops/s)", w.Name, w.Concurrency), w.Service.Throughput, g, note)
			t.Goal, t.Measured = fmt.Sprintf(">= %.0f", g), fmt.Sprintf("%.0f", w.Service.Throughput)
			out = append(out, t)
		}
		if w.Ceiling != nil {
			out = append(out, atLeast(fmt.Sprintf("%s service/ceiling throughput, c=%d", w.Name, w.Concurrency), w.CeilingRatio, goalCeilingRatio, ""))
		}
	}
	return out
}

// scalingChecks fail the run when a side serves fewer operations with 4
// clients than with 1 (issue 17): on 2 cores the throughput may stop
// growing, but falling means something serializes or churns (connections
// closed and re-opened, locks), and the figures of that run mislead.
//
// Only the service part's workloads (ServiceReport) are checked, never the
// conversation part's (issue 15, held to its window p99 goal by
// conversationTargets): appends to one session are serialized by design
// (the session's row lock hands out seq), and each append turn is a commit
// of its own, so its c=4 / c=1 says nothing about the client path this
// check guards; the harness gives every worker its own session, but a
// deployment's appends to one conversation cannot scale with clients.
func scalingChecks(ws []Workload) []Target {
	one := map[string]Workload{}
	for _, w := range ws {
		if w.Concurrency == 1 {
			one[w.Name] = w
		}
	}
	var out []Target
	for _, w := range ws {
		base, ok := one[w.Name]
		if w.Concurrency != 4 || !ok {
			continue
		}
		sides := []struct {
			name     string
			at1, at4 float64
		}{{"service", base.Service.Throughput, w.Service.Throughput}, {"raw", base.Raw.Throughput, w.Raw.Throughput}}
		if w.Ceiling != nil && base.Ceiling != nil {
			sides = append(sides, struct {
				name     string
				at1, at4 float64
			}{"ceiling", base.Ceiling.Throughput, w.Ceiling.Throughput})
		}
		for _, sd := range sides {
			t := atLeast(fmt.Sprintf("%s %s: throughput c=4 / c=1", w.Name, sd.name), ratio(sd.at4, sd.at1), 1, "")
			t.Measured = fmt.Sprintf("%.2f (%.0f / %.0f)", ratio(sd.at4, sd.at1), sd.at4, sd.at1)
			t.Check = true
			out = append(out, t)
		}
	}
	return out
}

// conversationTargets: window assembly of a 10,000-message session under
// 20 ms at p99 (issue 15), for each strategy and concurrency measured.
func conversationTargets(c *ConversationReport) []Target {
	note := ""
	if c.Messages != 10_000 {
		note = fmt.Sprintf("measured on a session of %d messages; the goal is for 10,000", c.Messages)
	}
	var out []Target
	for _, w := range c.Workloads {
		if strings.HasSuffix(w.Name, " window") {
			out = append(out, below(fmt.Sprintf("%s p99 through the service, c=%d", w.Name, w.Concurrency), w.Service.Latency.P99, goalWindowP99Ms, note))
			out = append(out, atLeast(fmt.Sprintf("%s service/raw throughput, c=%d", w.Name, w.Concurrency), w.Ratio, goalWindowRatio, ""))
		}
		if w.Name == "append turn" {
			out = append(out, atLeast(fmt.Sprintf("append turn service/raw throughput, c=%d", w.Concurrency), w.Ratio, goalAppendRatio, ""))
		}
	}
	return out
}

// jobTargets: issue 32's bounds on the maintenance jobs: engine adds at
// most 1.5x slower at p99 while each job runs than alone, and compact and
// decay of 1M memories within 20 s and 3 s.
func jobTargets(j *JobsReport) []Target {
	note := ""
	if j.Rows != goalJobRows {
		note = fmt.Sprintf("measured at %d memories; the time goals are for 1,000,000", j.Rows)
	}
	var out []Target
	for _, o := range j.Operations {
		if o.AddDuring != nil && o.AddDuring.Ops > 0 {
			t := below(fmt.Sprintf("engine add p99 while %s runs (duty %.2f) / alone", o.Name, o.Duty), o.AddP99Factor, goalJobAddP99Factor,
				fmt.Sprintf("%.2f / %.2f ms, %d adds during", o.AddDuring.Latency.P99, o.AddAlone.Latency.P99, o.AddDuring.Ops))
			t.Goal, t.Measured = fmt.Sprintf("<= %.1fx", goalJobAddP99Factor), fmt.Sprintf("%.2fx", o.AddP99Factor)
			t.Met = o.AddP99Factor <= goalJobAddP99Factor
			out = append(out, t)
		}
		goal := map[string]float64{memory.OpCompact: goalCompactSec, memory.OpDecay: goalDecaySec}[o.Name]
		if goal > 0 && (o.Duty == 1 || o.Duty == 0) { // unpaced: pacing adds its pauses on purpose
			t := below(o.Name+" wall time", o.WallSec, goal, note)
			t.Goal, t.Measured = fmt.Sprintf("<= %.0f s", goal), fmt.Sprintf("%.2f s", o.WallSec)
			t.Met = o.WallSec <= goal
			out = append(out, t)
		}
	}
	return out
}

func operatorTargets(o *OperatorReport) []Target {
	goal, note := goalReadySec, ""
	switch o.Runtimes {
	case goalRuntimes:
	case goalBigRuntimes:
		goal = goalBigReadySec
	default:
		note = fmt.Sprintf("measured with %d runtimes; the goal is for 1,000 (make bench-full) and 5,000 (make bench-full N=5000)", o.Runtimes)
	}
	ready := below(fmt.Sprintf("%d MemoryRuntimes Ready", o.Runtimes), o.ReadySec, goal, note)
	ready.Goal = fmt.Sprintf("< %.0f s", goal)
	ready.Measured = fmt.Sprintf("%.1f s", o.ReadySec)
	if !o.AllReady {
		ready.Met, ready.Gap = false, 1
		ready.Measured = fmt.Sprintf("only %d of %d Ready", o.Ready, o.Runtimes)
	}
	p95 := below("per runtime, create to Ready, p95", o.ReadyLatency.P95/1000, goalReadyP95Sec, note)
	p95.Goal = fmt.Sprintf("< %.0f s", goalReadyP95Sec)
	p95.Measured = fmt.Sprintf("%.1f s", o.ReadyLatency.P95/1000)
	idle := Target{Name: fmt.Sprintf("operator writes during %.0f s idle", o.IdleWindowSec), Goal: "0",
		Measured: fmt.Sprint(o.IdleWrites), Met: o.IdleWrites == 0 && o.IdleWindowSec > 0}
	if !idle.Met {
		idle.Gap, idle.Note = 1, fmt.Sprint(o.IdleWritesByMethod)
	}
	out := []Target{ready, p95, idle}
	if o.Runtimes >= goalBigRuntimes {
		rss := below("operator peak RSS", o.ManagerPeakRSSMiB, goalBigPeakRSSMiB, "")
		rss.Goal, rss.Measured = fmt.Sprintf("< %.0f MiB", goalBigPeakRSSMiB), fmt.Sprintf("%.0f MiB", o.ManagerPeakRSSMiB)
		out = append(out, rss)
	}
	return out
}

func atLeast(name string, got, goal float64, note string) Target {
	t := Target{Name: name, Goal: fmt.Sprintf(">= %.2f", goal), Measured: fmt.Sprintf("%.2f", got), Met: got >= goal, Note: note}
	if !t.Met {
		t.Gap = round3((goal - got) / goal)
	}
	return t
}

func below(name string, got, goal float64, note string) Target {
	t := Target{Name: name, Goal: fmt.Sprintf("< %g ms", goal), Measured: fmt.Sprintf("%.2f ms", got), Met: got < goal, Note: note}
	if !t.Met {
		t.Gap = round3((got - goal) / goal)
	}
	return t
}

// largestGap names the missed target with the largest relative shortfall.
func largestGap(ts []Target) string {
	missed := make([]Target, 0, len(ts))
	for _, t := range ts {
		if !t.Met {
			missed = append(missed, t)
		}
	}
	if len(missed) == 0 {
		return ""
	}
	sort.SliceStable(missed, func(i, j int) bool { return missed[i].Gap > missed[j].Gap })
	m := missed[0]
	return fmt.Sprintf("%s: %s, goal %s (%.0f%% short)", m.Name, m.Measured, m.Goal, m.Gap*100)
}

// citusTargets: the service on Citus at least goalCitusRatio of the
// service on plain PostgreSQL (throughput, same run), for each workload
// and concurrency measured, and the same recall.
func citusTargets(c *CitusReport) []Target {
	if c == nil {
		return nil
	}
	var out []Target
	for _, w := range c.Workloads {
		out = append(out, atLeast(fmt.Sprintf("%s on Citus / on plain PostgreSQL, service throughput, c=%d", w.Name, w.Concurrency), w.Ratio, goalCitusRatio, ""))
	}
	q := c.Quality
	return append(out, Target{Name: "recall@10 of service vector search on Citus vs brute force", Goal: "1.0",
		Measured: fmt.Sprintf("%.4f (min %.2f over %d queries)", q.RecallAt10, q.MinRecall, q.Queries),
		Met:      q.RecallAt10 >= 1 && q.Queries > 0 && q.SmallOwnersComplete, Gap: 1 - q.RecallAt10})
}

// clientVectorTargets: search with a client vector is exact (a check: a
// miss fails the run), and a client vector costs the service no more CPU
// per search than embedding the query itself (reported: with the builtin
// embedder, the cheapest there is, the embedding saved is small beside
// decoding the vector's JSON; with a model behind HTTP it is not).
func clientVectorTargets(c *ClientVectorsReport) []Target {
	var out []Target
	for _, r := range c.Recall {
		out = append(out, Target{Name: "recall@10 of vector search with a client vector, " + r.Vectors, Goal: "1.0",
			Measured: fmt.Sprintf("%.4f (min %.2f over %d queries)", r.Recall, r.Min, r.Queries),
			Met:      r.Recall >= 1 && r.Queries > 0, Gap: round3(1 - r.Recall), Check: true})
	}
	for _, r := range c.Rows {
		if strings.HasPrefix(r.Name, "add") {
			continue
		}
		t := Target{Name: "service CPU per " + r.Name + ", client vector / embedded by the service", Goal: "<= 1.0",
			Measured: fmt.Sprintf("%.3f (%.2f / %.2f ms)", r.CPU, r.ClientCPU.TotalMs(), r.ServerCPU.TotalMs()),
			Met:      r.CPU > 0 && r.CPU <= 1,
			Note:     "builtin embedder on the server side; both sides in the same slices"}
		if !t.Met && r.CPU > 0 {
			t.Gap = round3(r.CPU - 1)
		}
		out = append(out, t)
	}
	return out
}
