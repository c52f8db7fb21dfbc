package main

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// Issue 32's rows: add p99 during each job against alone (<= 1.5x), compact
// and decay wall time, window and append ratios, serve CPU per search.
func TestIssue32Targets(t *testing.T) {
	stats := func(p99 float64, ops int) *RunStats { return &RunStats{Ops: ops, Latency: Latency{P99: p99}} }
	rep := &Report{
		Jobs: &JobsReport{Rows: goalJobRows, Operations: []JobOp{
			{Name: memory.OpDecay, Duty: 1, WallSec: 2.5, AddAlone: stats(10, 100), AddDuring: stats(14, 50), AddP99Factor: 1.4},
			{Name: memory.OpPurge, Duty: 1, WallSec: 9, AddAlone: stats(10, 100), AddDuring: stats(55, 50), AddP99Factor: 5.5},
			{Name: memory.OpCompact, Duty: 1, WallSec: 48, AddAlone: stats(10, 100), AddDuring: stats(0, 0)},
			// Paced: its own add factor; its wall time (pauses on
			// purpose) is not held to decay's goal.
			{Name: memory.OpDecay, Duty: 0.5, WallSec: 5, AddAlone: stats(10, 100), AddDuring: stats(12, 50), AddP99Factor: 1.2},
			{Name: memory.OpPurge, Duty: 0.5, WallSec: 18, AddAlone: stats(10, 100), AddDuring: stats(14, 50), AddP99Factor: 1.4},
			{Name: memory.OpSummarize, WallSec: 0.1},
		}},
		Conversation: &ConversationReport{Messages: 10_000, Workloads: []Workload{
			{Name: "token window", Concurrency: 1, Ratio: 0.34},
			{Name: "append turn", Concurrency: 4, Ratio: 0.7},
		}},
		Service: &ServiceReport{Quality: Quality{RecallAt10: 1, Queries: 1, SmallOwnersComplete: true}, Workloads: []Workload{
			{Name: "vector search", Concurrency: 1, Ratio: 1, ServiceCPU: &CPUPerOp{ServiceMs: 0.41}},
		}},
	}
	got := map[string]Target{}
	for _, tg := range targets(rep) {
		got[tg.Name] = tg
	}
	want := map[string]bool{
		"engine add p99 while decay runs (duty 1.00) / alone": true,
		"engine add p99 while purge runs (duty 1.00) / alone": false,
		"engine add p99 while purge runs (duty 0.50) / alone": true,
		"engine add p99 while decay runs (duty 0.50) / alone": true,
		"decay wall time":                          true,
		"compact wall time":                        false,
		"token window service/raw throughput, c=1": false,
		"append turn service/raw throughput, c=4":  true,
		"manager serve CPU per vector search, c=1": false,
	}
	for name, met := range want {
		tg, ok := got[name]
		if !ok {
			t.Errorf("no target %q (have %v)", name, keys(got))
			continue
		}
		if tg.Met != met {
			t.Errorf("%s: met %v, want %v (%s, goal %s)", name, tg.Met, met, tg.Measured, tg.Goal)
		}
	}
	// A job no add finished during has no ratio to judge; summarize has no add rows.
	for name := range got {
		if strings.Contains(name, "compact runs") || strings.Contains(name, "summarize") {
			t.Errorf("target %q from a job without adds during it", name)
		}
	}
	if tg := got["manager serve CPU per vector search, c=1"]; tg.Measured != "0.410 ms" {
		t.Errorf("serve CPU measured %q", tg.Measured)
	}
}

func keys(m map[string]Target) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// --job-duty takes 1 to 4 duties within (0, 1].
func TestParseDuties(t *testing.T) {
	got, err := parseDuties("1, 0.5,0.25")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 0.5 || got[2] != 0.25 {
		t.Fatalf("parseDuties = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1.5", "-0.5", "x", "1,1,1,1,1"} {
		if _, err := parseDuties(bad); err == nil {
			t.Errorf("parseDuties(%q) accepted", bad)
		}
	}
}
