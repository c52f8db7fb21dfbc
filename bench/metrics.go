package main

import (
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one reading of a Prometheus /metrics endpoint.
type scrape map[string]*dto.MetricFamily

// scrapeMetrics reads a plain-HTTP /metrics endpoint (the operator's).
func scrapeMetrics(ctx context.Context, url string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: status %d", url, resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return scrape(fams), nil
}

// byLabel sums counter (or untyped/gauge) name over samples that match,
// grouped by the value of label (all under "" when label is empty).
func (s scrape) byLabel(name, label string, match func(map[string]string) bool) map[string]float64 {
	return s.byKey(name, func(l map[string]string) string { return l[label] }, match)
}

// byKey is byLabel with the group computed from all labels.
func (s scrape) byKey(name string, key func(map[string]string) string, match func(map[string]string) bool) map[string]float64 {
	out := map[string]float64{}
	fam, ok := s[name]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if match != nil && !match(labels) {
			continue
		}
		var v float64
		switch {
		case m.Counter != nil:
			v = m.GetCounter().GetValue()
		case m.Gauge != nil:
			v = m.GetGauge().GetValue()
		case m.Untyped != nil:
			v = m.GetUntyped().GetValue()
		}
		out[key(labels)] += v
	}
	return out
}

// sum is byLabel over everything that matches.
func (s scrape) sum(name string, match func(map[string]string) bool) float64 {
	return s.byLabel(name, "", match)[""]
}

// delta subtracts before from after, key by key, keeping non-zero results.
func delta(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := int(v - before[k]); d != 0 {
			out[k] = d
		}
	}
	return out
}

// writeVerbs are the request verbs that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true, "CREATE": true, "UPDATE": true, "DELETECOLLECTION": true}
