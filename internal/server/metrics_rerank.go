package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-dev/engram/internal/memory"
)

// rerankMetrics measure the policy's reranker: how long its calls take
// (what reranking adds to a search) and how often a search fell back to
// the first-stage order because of it.
type rerankMetrics struct {
	duration  *prometheus.HistogramVec
	fallbacks *prometheus.CounterVec
}

func newRerankMetrics(reg *prometheus.Registry) *rerankMetrics {
	r := &rerankMetrics{
		duration: newHistogramVec("engram_rerank_duration_seconds",
			"Latency of calls to the policy's reranker by outcome (ok|error), failed and timed-out ones included.",
			[]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30},
			"outcome"),
		fallbacks: newCounterVec("engram_rerank_fallbacks_total",
			"Searches answered in the first-stage order because the reranker failed, by reason (timeout|upstream-error|malformed-answer).",
			"reason"),
	}
	reg.MustRegister(r.duration, r.fallbacks)
	for _, reason := range []string{memory.RerankTimeout, memory.RerankUpstream, memory.RerankMalformed} {
		r.fallbacks.WithLabelValues(reason) // export zeros, so rate() works from the start
	}
	return r
}

// countRerank counts a search answer's fallback, if it is one.
func (m *Metrics) countRerank(res *memory.SearchResult) {
	if m != nil && memory.IsRerankFallback(res.RerankReason) {
		m.rerank.fallbacks.WithLabelValues(res.RerankReason).Inc()
	}
}

// InstrumentReranker wraps r with the latency histogram. Errors pass
// through unchanged: the engine tells a timeout from a malformed answer.
func (m *Metrics) InstrumentReranker(r memory.Reranker) memory.Reranker {
	return &instrumentedReranker{next: r, m: m}
}

type instrumentedReranker struct {
	next memory.Reranker
	m    *Metrics
}

func (r *instrumentedReranker) Rerank(ctx context.Context, query string, docs []string) ([]memory.RerankHit, error) {
	start := time.Now()
	out, err := r.next.Rerank(ctx, query, docs)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	r.m.rerank.duration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	return out, err
}
