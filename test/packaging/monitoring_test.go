package packaging

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
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
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != naming.MetricsPortName || eps[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("PodMonitor endpoints %v", eps)
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

// TestChartMetricsFromMonitoringOnly: the chart passes its monitoring
// namespaces to the operator (which admits the memory services' metrics
// ports from there only) and admits the operator's own metrics port from
// the same namespaces, not from every pod of the release namespace.
func TestChartMetricsFromMonitoringOnly(t *testing.T) {
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	root := testenv.RepoRoot()
	for _, c := range []struct {
		name, flag string
		labels     map[string]string
		args       []string
	}{
		{"defaults", "kubernetes.io/metadata.name=monitoring", map[string]string{"kubernetes.io/metadata.name": "monitoring"}, nil},
		{"other labels", "team=obs", map[string]string{"team": "obs"},
			[]string{"--set", `monitoring.namespaceLabels.kubernetes\.io/metadata\.name=null`, "--set", "monitoring.namespaceLabels.team=obs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := decode(t, run(t, root, helm, append([]string{"template", "engram", "charts/engram", "--namespace", namespace}, c.args...)...))
			deps := kinds(objs, "Deployment")
			if len(deps) != 1 {
				t.Fatalf("%d Deployments", len(deps))
			}
			containers, _, _ := unstructured.NestedSlice(deps[0].Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			if !slices.Contains(args, "--service-metrics-namespaces="+c.flag) {
				t.Errorf("operator args %v lack --service-metrics-namespaces=%s", args, c.flag)
			}
			nps := kinds(objs, "NetworkPolicy")
			if len(nps) != 1 {
				t.Fatalf("%d NetworkPolicies", len(nps))
			}
			rules, _, _ := unstructured.NestedSlice(nps[0].Object, "spec", "ingress")
			from, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "from")
			want := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": toAny(c.labels)}}}
			if len(rules) != 1 || !reflect.DeepEqual(from, want) {
				t.Errorf("operator NetworkPolicy admits %v, want %v only", from, want)
			}
		})
	}
	if _, err := exec.Command(helm, "template", "engram", filepath.Join(root, "charts", "engram"), "--namespace", namespace,
		"--set", "monitoring.namespaceLabels=null").CombinedOutput(); err == nil {
		t.Error("the chart renders with no monitoring namespace labels (every namespace would be admitted)")
	}
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
