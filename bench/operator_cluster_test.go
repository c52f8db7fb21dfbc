package main

import "testing"

// TestNamespacesKeepConnectionShare: no namespace of the operator part
// holds more runtimes than its connection share admits on the benchmark
// server (1,000 in 10 namespaces had 100 each, and 260 were refused).
func TestNamespacesKeepConnectionShare(t *testing.T) {
	for _, c := range []struct{ runtimes, want int }{{1, 1}, {40, 2}, {200, 10}, {500, 10}, {1000, 20}, {5000, 100}} {
		got := namespacesFor(c.runtimes)
		if got != c.want {
			t.Errorf("namespacesFor(%d) = %d, want %d", c.runtimes, got, c.want)
		}
		if perNS := (c.runtimes + got - 1) / got; perNS > maxRuntimesPerNamespace {
			t.Errorf("%d runtimes in %d namespaces: %d in one, more than %d", c.runtimes, got, perNS, maxRuntimesPerNamespace)
		}
	}
}
