package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// GET /metrics has a listener of its own (--metrics-listen, the pod's port
// "metrics"), never the API port: an API client (any pod the runtime's
// NetworkPolicy admits to the API) cannot read it, and the operator's
// NetworkPolicy admits the metrics port from the monitoring namespaces only.
// What it exports is bounded anyway: route patterns, never owner ids or
// token names, and tenant-wide counts GET /v1/stats gives an admin token.

// metricsOff are the --metrics-listen values that turn the listener off.
func metricsOff(addr string) bool { return addr == "" || addr == "0" }

// maxScrapesInFlight bounds concurrent scrapes: each may count the tenant's
// memories (statsCollector), and nobody needs more than a few at once.
const maxScrapesInFlight = 4

// listenMetrics opens the metrics listener; nil, nil when it is off.
func listenMetrics(addr string, m *Metrics, logger *slog.Logger) (*http.Server, net.Listener, error) {
	if metricsOff(addr) {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening for metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		MaxRequestsInFlight: maxScrapesInFlight,
		Timeout:             statsTimeout + 5*time.Second,
	}))
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return hs, ln, nil
}

// stopMetrics closes the metrics listener after the API's shutdown, so
// Prometheus can watch the drain to its end.
func stopMetrics(hs *http.Server) {
	if hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		_ = hs.Close()
	}
}
