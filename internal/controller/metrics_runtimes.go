package controller

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// runtimeStates are the values of the state label of engram_operator_runtimes.
var runtimeStates = []string{"ready", "reconciling", "stalled", "paused", "not_ready"}

var runtimesDesc = prometheus.NewDesc("engram_operator_runtimes",
	"MemoryRuntimes by state, from their conditions: paused (Paused), stalled (Stalled: a human has to act), "+
		"reconciling (Reconciling: the generation is being acted on), ready (Ready, none of the former), not_ready (the rest).",
	[]string{"state"}, nil)

// runtimeCollector counts the runtimes by state when scraped, from the
// manager's cache: no bookkeeping in the reconciler, nothing an operator
// restart could lose, and no API request.
type runtimeCollector struct{ cache client.Reader }

func (c runtimeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- runtimesDesc }

func (c runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	var list memoryv1alpha1.MemoryRuntimeList
	if !listForScrape(c.cache, &list, ch, runtimesDesc) {
		return
	}
	counts := map[string]float64{}
	for i := range list.Items {
		counts[stateOf(&list.Items[i])]++
	}
	for _, s := range runtimeStates {
		ch <- prometheus.MustNewConstMetric(runtimesDesc, prometheus.GaugeValue, counts[s], s)
	}
}

// listForScrape lists into list from the cache, for at most a scrape's
// 5 seconds; a failure is sent on ch as an invalid metric of d, and false
// returned.
func listForScrape(c client.Reader, list client.ObjectList, ch chan<- prometheus.Metric, d *prometheus.Desc) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(d, err)
		return false
	}
	return true
}

// stateOf is the state label of one runtime.
func stateOf(rt *memoryv1alpha1.MemoryRuntime) string {
	is := func(cond string) bool { return meta.IsStatusConditionTrue(rt.Status.Conditions, cond) }
	switch {
	case is(memoryv1alpha1.ConditionPaused):
		return "paused"
	case is(memoryv1alpha1.ConditionStalled):
		return "stalled"
	case is(memoryv1alpha1.ConditionReconciling):
		return "reconciling"
	case is(memoryv1alpha1.ConditionReady):
		return "ready"
	}
	return "not_ready"
}

// registerRuntimeCollector adds the collector to controller-runtime's
// registry (served on /metrics). A second manager in the same process (tests)
// keeps the first one's collector.
func registerRuntimeCollector(cache client.Reader) error {
	err := metrics.Registry.Register(runtimeCollector{cache: cache})
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}
