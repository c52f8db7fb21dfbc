package main

import (
	"strings"
	"testing"

	pgv "github.com/pgvector/pgvector-go"
)

// TestScalingCheckFailsWhenC4IsBelowC1: a side slower at 4 clients than at
// 1 is a failed check; one that is as fast or faster passes.
func TestScalingCheckFailsWhenC4IsBelowC1(t *testing.T) {
	ws := []Workload{
		{Name: "vector search", Concurrency: 1, Service: RunStats{Throughput: 200}, Raw: RunStats{Throughput: 400}, Ceiling: &RunStats{Throughput: 800}},
		{Name: "vector search", Concurrency: 4, Service: RunStats{Throughput: 300}, Raw: RunStats{Throughput: 240}, Ceiling: &RunStats{Throughput: 800}},
	}
	got := map[string]bool{}
	for _, c := range scalingChecks(ws) {
		if !c.Check {
			t.Errorf("%s is not a check", c.Name)
		}
		got[c.Name] = c.Met
	}
	want := map[string]bool{
		"vector search service: throughput c=4 / c=1": true,
		"vector search raw: throughput c=4 / c=1":     false,
		"vector search ceiling: throughput c=4 / c=1": true,
	}
	if len(got) != len(want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	for name, met := range want {
		if got[name] != met {
			t.Errorf("%s: met %v, want %v", name, got[name], met)
		}
	}
}

// TestPgbenchScript: the owner becomes pgbench's random owner, every other
// argument a literal of its type, and $10 is not read as $1 followed by 0.
func TestPgbenchScript(t *testing.T) {
	args := []any{"owner-0001", []string{"a", `b"c`}, []float64{1.5, 0}, pgv.NewVector([]float32{0.5, -1}), 0.25, 10, "it's", 3, 4, 5}
	got, err := pgbenchScript("SELECT $1, $2, $3, $4 <=> x, $5, $6, $7, $10\n  FROM t", args, 40)
	if err != nil {
		t.Fatal(err)
	}
	want := "\\set o random(0, 39)\n" +
		`SELECT ('owner-' || lpad(:o::text, 4, '0')), '{"a","b\"c"}'::text[], '{1.5,0}'::float8[], '[0.5,-1]' <=> x, 0.25::float8, 10, 'it''s', 5 FROM t;` + "\n"
	if got != want {
		t.Fatalf("script:\n%s\nwant:\n%s", got, want)
	}
	if _, err := pgbenchScript("SELECT $1, $2", []any{"o", struct{}{}}, 1); err == nil || !strings.Contains(err.Error(), "$2") {
		t.Fatalf("an argument without a literal form: %v", err)
	}
}

// TestScalingCheckLeavesTheConversationPartOut: the conversation part's
// rows (issue 15) are held to their window p99 goal, never to c=4 >= c=1.
func TestScalingCheckLeavesTheConversationPartOut(t *testing.T) {
	rep := &Report{Conversation: &ConversationReport{Messages: 10_000, Workloads: []Workload{
		{Name: "append turn", Concurrency: 1, Service: RunStats{Throughput: 400}, Raw: RunStats{Throughput: 500}},
		{Name: "append turn", Concurrency: 4, Service: RunStats{Throughput: 300}, Raw: RunStats{Throughput: 350}},
	}}}
	for _, tg := range targets(rep) {
		if tg.Check || strings.Contains(tg.Name, "c=4 / c=1") {
			t.Errorf("conversation row checked for scaling: %+v", tg)
		}
	}
}
