package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-dev/engram/internal/memory"
)

// contentMetrics count what the write path did to content: secrets
// redacted and prompt injections the guard flagged or rejected (the
// dashboard's "redactions and guard" panel and docs/operations.md).
type contentMetrics struct {
	redactions *prometheus.CounterVec
	guard      *prometheus.CounterVec
}

func newContentMetrics(reg prometheus.Registerer) *contentMetrics {
	c := &contentMetrics{
		redactions: newCounterVec("engram_memory_redactions_total",
			"Secrets redacted from written memories, by kind of secret.",
			"kind"),
		guard: newCounterVec("engram_memory_guard_total",
			"Writes the prompt-injection guard acted on, by outcome (flagged: stored and hidden from agents; rejected: refused with 422).",
			"outcome"),
	}
	reg.MustRegister(c.redactions, c.guard)
	for _, o := range []string{"flagged", "rejected"} {
		c.guard.WithLabelValues(o) // export zeros, so rate() works from the start
	}
	return c
}

// countContent counts the redactions and flags of stored writes.
func (m *Metrics) countContent(r memory.AddResult) {
	for _, kind := range r.Redactions {
		m.content.redactions.WithLabelValues(kind).Inc()
	}
	for _, f := range r.Memory.Flags {
		if f == memory.FlagInjection {
			m.content.guard.WithLabelValues("flagged").Inc()
		}
	}
}

// guardRejection is how the engine words a write the guard refused.
const guardRejection = "rejected by the injection guard"

// countRefusal counts a write the guard rejected (one per refused field).
func (m *Metrics) countRefusal(err error) {
	var ve *memory.ValidationError
	if m == nil || !errors.As(err, &ve) {
		return
	}
	for _, f := range ve.Fields {
		if strings.HasPrefix(f.Message, guardRejection) {
			m.content.guard.WithLabelValues("rejected").Inc()
		}
	}
}

// statsCollector exports the tenant's memory and owner counts. Counting
// scans the memories table, so a scrape reuses the last count for
// statsMaxAge; with several replicas each counts on its own.
type statsCollector struct {
	store *memory.Store
	mu    sync.Mutex
	at    time.Time
	last  *memory.Stats
}

const (
	statsMaxAge  = time.Minute
	statsTimeout = 5 * time.Second
)

var (
	descMemories = prometheus.NewDesc("engram_memories", "Memories of the tenant by state (active, inactive), counted at most once a minute.", []string{"state"}, nil)
	descOwners   = prometheus.NewDesc("engram_memory_owners", "Owners with at least one memory, counted at most once a minute.", nil, nil)
)

// RegisterStats exports the counts of GET /v1/stats as gauges.
func (m *Metrics) RegisterStats(store *memory.Store) {
	m.Registry.MustRegister(&statsCollector{store: store})
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descMemories
	ch <- descOwners
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || time.Since(c.at) > statsMaxAge {
		ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
		st, err := c.store.Stats(ctx)
		cancel()
		if err == nil {
			c.last, c.at = st, time.Now()
		}
	}
	if c.last == nil {
		return // the database is down: no series rather than stale zeros
	}
	ch <- prometheus.MustNewConstMetric(descMemories, prometheus.GaugeValue, float64(c.last.Active), "active")
	ch <- prometheus.MustNewConstMetric(descMemories, prometheus.GaugeValue, float64(c.last.Inactive), "inactive")
	ch <- prometheus.MustNewConstMetric(descOwners, prometheus.GaugeValue, float64(c.last.Owners))
}
