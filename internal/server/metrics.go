package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/engram-dev/engram/internal/memory"
)

// Metrics are the service's Prometheus metrics, on a registry of their own
// (not the global one) so tests and several servers in one process never
// collide. Names are listed in docs/api.md.
type Metrics struct {
	Registry *prometheus.Registry

	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	inflight     prometheus.Gauge
	shed         prometheus.Counter
	rateLimited  *prometheus.CounterVec
	addActions   *prometheus.CounterVec
	upstreamTime *prometheus.HistogramVec
	upstreamErrs *prometheus.CounterVec
	tokens       prometheus.Gauge
	signingKeys  prometheus.Gauge
	mcpToolCalls *prometheus.CounterVec
	tlsExpiry    prometheus.Gauge
	content      *contentMetrics // metrics_content.go
	rerank       *rerankMetrics  // metrics_rerank.go
	reembed      *reembedMetrics // metrics_reembed.go
}

// NewMetrics creates and registers the metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: newCounterVec("engram_http_requests_total",
			"HTTP requests by route pattern, method and status code.",
			"route", "method", "code"),
		duration: newHistogramVec("engram_http_request_duration_seconds",
			"HTTP request latency by route pattern, method and status code.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			"route", "method", "code"),
		inflight: newGauge("engram_http_inflight_requests",
			"API requests being served now (those counted against --max-inflight)."),
		shed: newCounter("engram_http_shed_requests_total",
			"API requests answered 429 because --max-inflight requests were already in flight."),
		rateLimited: newCounterVec("engram_rate_limited_total",
			"Requests and model calls refused by a credential's rate limit, by class (api: any API request; llm: LLM-backed requests and the arbiter's calls; inflight: a request over --max-inflight-per-credential) and outcome (rejected: answered 429; arbitration_skipped: an add was stored without asking the LLM).",
			"class", "outcome"),
		addActions: newCounterVec("engram_memory_add_actions_total",
			"Writes by the dedup action they ended in (added, merged, reactivated, updated, replaced, noop).",
			"action"),
		upstreamTime: newHistogramVec("engram_upstream_request_duration_seconds",
			"Latency of embedding and LLM calls (service=embedding|llm), failed ones included.",
			[]float64{.0005, .001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			"service"),
		upstreamErrs: newCounterVec("engram_upstream_errors_total",
			"Failed embedding and LLM calls (service=embedding|llm).",
			"service"),
		tokens: newGauge("engram_auth_tokens",
			"Static bearer tokens currently accepted (0: only signed tokens work, if any)."),
		signingKeys: newGauge("engram_auth_signing_keys",
			"Keys that verify signed tokens (0: no signed token is accepted)."),
		mcpToolCalls: newCounterVec("engram_mcp_tool_calls_total",
			"MCP tool calls by tool and outcome (ok|error).",
			"tool", "outcome"),
		tlsExpiry: newGauge("engram_tls_certificate_expiry_timestamp_seconds",
			"When the TLS certificate being served expires (Unix time; 0: the service serves plain HTTP)."),
	}
	m.Registry.MustRegister(m.requests, m.duration, m.inflight, m.shed, m.rateLimited, m.addActions, m.upstreamTime,
		m.upstreamErrs, m.tokens, m.signingKeys, m.mcpToolCalls, m.tlsExpiry,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.content = newContentMetrics(m.Registry)
	m.rerank = newRerankMetrics(m.Registry)
	m.reembed = newReembedMetrics(m.Registry)
	for _, svc := range []string{"embedding", "llm"} {
		m.upstreamErrs.WithLabelValues(svc) // export zeros, so rate() works from the start
	}
	for _, l := range [][2]string{{limitClassAPI, limitRejected}, {limitClassLLM, limitRejected}, {limitClassLLM, limitArbitrationSkipped},
		{limitClassInflight, limitRejected}} {
		m.rateLimited.WithLabelValues(l[0], l[1])
	}
	return m
}

func (m *Metrics) observeRequest(route, method string, code int, d time.Duration) {
	switch method {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
	default:
		method = "other" // clients choose methods freely; label values must stay bounded
	}
	c := strconv.Itoa(code)
	m.requests.WithLabelValues(route, method, c).Inc()
	m.duration.WithLabelValues(route, method, c).Observe(d.Seconds())
}

func (m *Metrics) countActions(results ...memory.AddResult) {
	for _, r := range results {
		m.addActions.WithLabelValues(string(r.Action)).Inc()
		m.countContent(r)
	}
}

func (m *Metrics) setTokens(n int) {
	if m != nil {
		m.tokens.Set(float64(n))
	}
}

func (m *Metrics) setSigningKeys(n int) {
	if m != nil {
		m.signingKeys.Set(float64(n))
	}
}

// RegisterPool exports the pgx pool's statistics.
func (m *Metrics) RegisterPool(pool *pgxpool.Pool) {
	m.Registry.MustRegister(&poolCollector{pool: pool})
}

// poolCollector reads pgxpool.Stat at scrape time.
type poolCollector struct{ pool *pgxpool.Pool }

var (
	poolAcquired    = prometheus.NewDesc("engram_db_pool_acquired_connections", "Connections in use now.", nil, nil)
	poolIdle        = prometheus.NewDesc("engram_db_pool_idle_connections", "Idle connections now.", nil, nil)
	poolTotal       = prometheus.NewDesc("engram_db_pool_total_connections", "Open connections now (acquired, idle and being opened).", nil, nil)
	poolMax         = prometheus.NewDesc("engram_db_pool_max_connections", "Pool size limit (--db-max-conns).", nil, nil)
	poolAcquires    = prometheus.NewDesc("engram_db_pool_acquires_total", "Successful connection acquisitions.", nil, nil)
	poolAcquireTime = prometheus.NewDesc("engram_db_pool_acquire_duration_seconds_total", "Time spent waiting for connections.", nil, nil)
	poolEmpty       = prometheus.NewDesc("engram_db_pool_empty_acquires_total", "Acquisitions that had to wait because no connection was idle.", nil, nil)
	poolCanceled    = prometheus.NewDesc("engram_db_pool_canceled_acquires_total", "Acquisitions canceled by their context.", nil, nil)
	poolNewConns    = prometheus.NewDesc("engram_db_pool_new_connections_total", "Connections opened.", nil, nil)
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolAcquired, poolIdle, poolTotal, poolMax, poolAcquires, poolAcquireTime, poolEmpty, poolCanceled, poolNewConns} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(poolAcquired, float64(s.AcquiredConns()))
	gauge(poolIdle, float64(s.IdleConns()))
	gauge(poolTotal, float64(s.TotalConns()))
	gauge(poolMax, float64(s.MaxConns()))
	counter(poolAcquires, float64(s.AcquireCount()))
	counter(poolAcquireTime, s.AcquireDuration().Seconds())
	counter(poolEmpty, float64(s.EmptyAcquireCount()))
	counter(poolCanceled, float64(s.CanceledAcquireCount()))
	counter(poolNewConns, float64(s.NewConnsCount()))
}

// instrumentedEmbedder records the latency and errors of an embedder and
// marks its errors as upstream failures.
type instrumentedEmbedder struct {
	next memory.Embedder
	m    *Metrics
	// service is "embedding"; the builtin embedder is measured too (cheap,
	// and it shows when embedding dominates a request).
	service string
}

// InstrumentEmbedder wraps e with metrics.
func (m *Metrics) InstrumentEmbedder(e memory.Embedder) memory.Embedder {
	return &instrumentedEmbedder{next: e, m: m, service: "embedding"}
}

func (e *instrumentedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	out, err := e.next.Embed(ctx, texts)
	e.m.upstreamTime.WithLabelValues(e.service).Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, e.m.upstreamFailed(ctx, e.service, err)
	}
	return out, nil
}

func (e *instrumentedEmbedder) Dimensions() int { return e.next.Dimensions() }

type instrumentedLLM struct {
	next memory.LLM
	m    *Metrics
}

// InstrumentLLM wraps l with metrics.
func (m *Metrics) InstrumentLLM(l memory.LLM) memory.LLM { return &instrumentedLLM{next: l, m: m} }

func (l *instrumentedLLM) CompleteJSON(ctx context.Context, system, user string) (string, error) {
	start := time.Now()
	out, err := l.next.CompleteJSON(ctx, system, user)
	l.m.upstreamTime.WithLabelValues("llm").Observe(time.Since(start).Seconds())
	if err != nil {
		return "", l.m.upstreamFailed(ctx, "llm", err)
	}
	return out, nil
}

// upstreamFailed counts a failed call and wraps err. A call canceled because
// the client went away is not the upstream's fault and is returned as is.
func (m *Metrics) upstreamFailed(ctx context.Context, service string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	m.upstreamErrs.WithLabelValues(service).Inc()
	return &UpstreamError{Service: service, Err: err}
}

// newCounterVec, newCounter, newGauge and newHistogramVec build the service's metrics that
// need nothing but a name, a help text, their labels (and buckets); NewMetrics
// registers them.
func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func newGauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func newHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}
