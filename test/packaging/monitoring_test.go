package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestChartMonitoring renders the chart's monitoring objects (off by
// default; the Prometheus Operator's CRDs are not in envtest, so they are
// checked by content): the dashboard ConfigMap carries the dashboard, the
// PrometheusRule the rule file's groups, the PodMonitor selects the memory
// service pods on their named port.
func TestChartMonitoring(t *testing.T) {
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	root := testenv.RepoRoot()
	if objs := decode(t, run(t, root, helm, "template", "engram", "charts/engram", "--namespace", namespace)); len(kinds(objs, "PodMonitor", "PrometheusRule"))+len(named(objs, "engram-dashboard")) != 0 {
		t.Error("monitoring objects render by default; they must be off")
	}
	objs := decode(t, run(t, root, helm, "template", "engram", "charts/engram", "--namespace", namespace,
		"--set", "podMonitor.enabled=true", "--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true"))

	dash := named(objs, "engram-dashboard")
	file, err := os.ReadFile(filepath.Join(root, "config", "grafana", "engram-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dash) != 1 || dash[0].GetLabels()["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap: %v", dash)
	}
	data, _, _ := unstructured.NestedString(dash[0].Object, "data", "engram-dashboard.json")
	var got, want any
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("the ConfigMap's dashboard is not JSON: %v", err)
	}
	_ = json.Unmarshal(file, &want)
	if !reflect.DeepEqual(got, want) {
		t.Error("the ConfigMap's dashboard differs from config/grafana/engram-dashboard.json")
	}

	rules := kinds(objs, "PrometheusRule")
	rulesFile, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "engram-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wantRules map[string]any
	if err := yaml.Unmarshal(rulesFile, &wantRules); err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || !reflect.DeepEqual(rules[0].Object["spec"], wantRules) {
		t.Errorf("the PrometheusRule's spec differs from config/prometheus/engram-rules.yaml")
	}

	pm := kinds(objs, "PodMonitor")
	if len(pm) != 1 {
		t.Fatalf("%d PodMonitors", len(pm))
	}
	sel, _, _ := unstructured.NestedStringMap(pm[0].Object, "spec", "selector", "matchLabels")
	if sel[naming.LabelComponent] != naming.ComponentService || sel[naming.LabelName] != naming.AppName {
		t.Errorf("PodMonitor selector %v does not select the memory service pods", sel)
	}
	eps, _, _ := unstructured.NestedSlice(pm[0].Object, "spec", "podMetricsEndpoints")
	if len(eps) != 2 || eps[0].(map[string]any)["port"] != naming.PortName || eps[0].(map[string]any)["path"] != "/metrics" {
		t.Fatalf("PodMonitor endpoints %v", eps)
	}
	// Runtimes with spec.service.tls: port https, scraped over HTTPS.
	if tlsEP := eps[1].(map[string]any); tlsEP["port"] != naming.PortNameTLS || tlsEP["scheme"] != "https" || tlsEP["path"] != "/metrics" || tlsEP["tlsConfig"] == nil {
		t.Errorf("PodMonitor TLS endpoint %v", tlsEP)
	}
	if any, _, _ := unstructured.NestedBool(pm[0].Object, "spec", "namespaceSelector", "any"); !any {
		t.Error("PodMonitor does not look in every namespace by default")
	}
}

func kinds(objs []*unstructured.Unstructured, ks ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		for _, k := range ks {
			if o.GetKind() == k {
				out = append(out, o)
			}
		}
	}
	return out
}

func named(objs []*unstructured.Unstructured, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetName() == name {
			out = append(out, o)
		}
	}
	return out
}
