package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-dev/engram/internal/memory"
)

// reembedMetrics count the service's dual writes during a re-embed.
type reembedMetrics struct {
	dualWrites *prometheus.CounterVec
}

func newReembedMetrics(r *prometheus.Registry) *reembedMetrics {
	m := &reembedMetrics{dualWrites: newCounterVec("engram_reembed_dual_writes_total",
		"Writes of a vector during a re-embed, by what became of the next embedder's vector (written: stored with it; failed or timeout: the next embedder failed or was slower than reembed.timeout, stored without it for the re-embed's fill; stale: the re-embed was switched or aborted before the write).",
		"outcome")}
	r.MustRegister(m.dualWrites)
	for _, o := range memory.DualWriteOutcomes {
		m.dualWrites.WithLabelValues(o) // export zeros, so rate() works from the start
	}
	return m
}

// CountDualWrite counts one dual write's outcome (memory.NextEmbedder.Count).
func (m *Metrics) CountDualWrite(outcome string) { m.reembed.dualWrites.WithLabelValues(outcome).Inc() }
