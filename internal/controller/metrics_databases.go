package controller

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// The metrics of MemoryDatabases. The exact time of each check is here, not
// in the status (status.lastCheck moves only when something else changed).
var (
	databaseLastCheck = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "engram_operator_database_last_check_timestamp_seconds",
		Help: "When the operator last checked each MemoryDatabase (Unix time), reachable or not.",
	}, []string{"database"})
	placements = registeredCounterVec("engram_operator_placements_total",
		"Tenants placed on each MemoryDatabase by this operator process.",
		"database")
)

var (
	databaseReachableDesc = prometheus.NewDesc("engram_operator_database_reachable",
		"1 when the last check of the MemoryDatabase reached it, else 0.", []string{"database"}, nil)
	databaseTenantsDesc = prometheus.NewDesc("engram_operator_database_tenants",
		"Tenants placed on the MemoryDatabase (status.tenants).", []string{"database"}, nil)
	databaseMaxTenantsDesc = prometheus.NewDesc("engram_operator_database_max_tenants",
		"spec.capacity.maxTenants of the MemoryDatabase; absent without a bound.", []string{"database"}, nil)
	databaseBytesDesc = prometheus.NewDesc("engram_operator_database_bytes",
		"Size of the MemoryDatabase (status.bytesUsed).", []string{"database"}, nil)
	databaseMaxBytesDesc = prometheus.NewDesc("engram_operator_database_max_bytes",
		"spec.capacity.maxBytes of the MemoryDatabase; absent without a bound.", []string{"database"}, nil)
)

// databaseCollector reads the databases' status from the manager's cache
// when scraped, like runtimeCollector: no bookkeeping, no API request.
type databaseCollector struct{ cache client.Reader }

func (c databaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{databaseReachableDesc, databaseTenantsDesc, databaseMaxTenantsDesc, databaseBytesDesc, databaseMaxBytesDesc} {
		ch <- d
	}
}

func (c databaseCollector) Collect(ch chan<- prometheus.Metric) {
	var list memoryv1alpha1.MemoryDatabaseList
	if !listForScrape(c.cache, &list, ch, databaseReachableDesc) {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, name string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
	}
	for i := range list.Items {
		db := &list.Items[i]
		reachable := 0.0
		if db.Reachability() == "True" {
			reachable = 1
		}
		gauge(databaseReachableDesc, reachable, db.Name)
		gauge(databaseTenantsDesc, float64(db.Status.Tenants), db.Name)
		gauge(databaseBytesDesc, float64(db.BytesUsed()), db.Name)
		if n := db.MaxTenants(); n >= 0 {
			gauge(databaseMaxTenantsDesc, float64(n), db.Name)
		}
		if n := db.MaxBytes(); n >= 0 {
			gauge(databaseMaxBytesDesc, float64(n), db.Name)
		}
	}
}

// forgetDatabaseMetrics drops the series of a deleted database.
func forgetDatabaseMetrics(name string) {
	databaseLastCheck.DeleteLabelValues(name)
	placements.DeleteLabelValues(name)
}

func init() {
	metrics.Registry.MustRegister(databaseLastCheck)
}

// registerDatabaseCollector adds the collector of the databases' status
// (once per process, as registerRuntimeCollector).
func registerDatabaseCollector(cache client.Reader) error {
	err := metrics.Registry.Register(databaseCollector{cache: cache})
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}
