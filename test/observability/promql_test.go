package observability

import (
	"slices"
	"testing"
)

func TestMetricNamesExtractor(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`up{container="memory"} == 0`, []string{"up"}},
		{`sum by (route) (rate(engram_http_requests_total{namespace=~"$namespace", code=~"5.."}[$__rate_interval])) / sum by (route) (rate(engram_http_requests_total[5m]))`,
			[]string{"engram_http_requests_total"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(engram_http_request_duration_seconds_bucket{route=~"POST /v1/owners/\\{owner\\}/(search|context)"}[5m]))) > 1`,
			[]string{"engram_http_request_duration_seconds_bucket"}},
		{`(time() - a_seconds) > 2 * b_seconds and b_seconds > 0`, []string{"a_seconds", "b_seconds"}},
		{`max by (ns) (x{reason="by (y)"}) == 0 or label_replace(sum by (s) (rate(z[5m])) > 0.1, "runtime", "$1", "service", "(.*)")`, []string{"x", "z"}},
		{`label_values(engram_memoryruntime_ready{namespace=~"$namespace"}, runtime)`, []string{"engram_memoryruntime_ready", "runtime"}},
	}
	for _, c := range cases {
		if got := MetricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
	if balanced(`sum(rate(x[5m])`) || !balanced(`sum(rate(x{a="("}[5m]))`) {
		t.Error("balanced is wrong")
	}
}
