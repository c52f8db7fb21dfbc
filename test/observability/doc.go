// Package observability checks the Grafana dashboard (config/grafana) and
// the Prometheus rules (config/prometheus) against the metrics Engram
// really exposes: a real `manager serve` on real PostgreSQL is scraped and
// a real operator's registry gathered, and every metric a panel or an alert
// names must be among them.
package observability
