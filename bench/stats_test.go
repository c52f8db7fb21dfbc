package main

import (
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	samples := make([]time.Duration, 100)
	for i := range samples {
		samples[i] = time.Duration(100-i) * time.Millisecond // unsorted on purpose
	}
	got := summarize(samples)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", got.P50, 50}, {"p95", got.P95, 95}, {"p99", got.P99, 99}, {"max", got.Max, 100}, {"mean", got.Mean, 50.5}} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if (summarize(nil) != Latency{}) {
		t.Error("no samples must give a zero Latency")
	}
}

func TestCorpusIsDeterministicAndVaried(t *testing.T) {
	c := newCorpus()
	a, b := c.stored("owner-0001", 7), c.stored("owner-0001", 7)
	if a != b {
		t.Fatalf("the same key gave %q and %q", a.Content, b.Content)
	}
	seen := map[string]bool{}
	for i := range 1000 {
		it := c.stored("owner-0001", i)
		if seen[it.Content] {
			t.Fatalf("memory %d repeats %q", i, it.Content)
		}
		seen[it.Content] = true
		if len(it.Content) > 500 || it.Importance < 1 || it.Importance > 10 {
			t.Fatalf("memory %d out of the default policy's limits: %+v", i, it)
		}
	}
	q := c.query(rngFor("q"), "owner-0001", 7)
	shared := 0
	for _, w := range strings.Fields(q) {
		if strings.Contains(a.Content, w) {
			shared++
		}
	}
	if shared < 3 {
		t.Errorf("query %q shares %d words with its memory %q, want >= 3", q, shared, a.Content)
	}
}

func TestLargestGap(t *testing.T) {
	ts := []Target{
		atLeast("a", 0.6, 0.7, ""), // 14% short
		below("b", 15, 10, ""),     // 50% over
		atLeast("c", 0.9, 0.7, ""), // met
	}
	if got := largestGap(ts); !strings.HasPrefix(got, "b:") {
		t.Errorf("largest gap = %q, want b", got)
	}
	if got := largestGap(ts[2:]); got != "" {
		t.Errorf("all met: largest gap = %q, want none", got)
	}
}
