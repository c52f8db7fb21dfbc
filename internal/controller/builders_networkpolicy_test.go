package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// The default NetworkPolicy admits the service port from the runtime's own
// namespace and nothing else, on the runtime's pods only.
func TestNetworkPolicyDefault(t *testing.T) {
	rt := testRuntime()
	if !rt.NetworkPolicyEnabled() {
		t.Fatal("a runtime without spec.service.networkPolicy must get a NetworkPolicy")
	}
	np := specs.NetworkPolicy(rt, monitoringNamespaces())
	if np.Name != "bot" || np.Namespace != "team-a" || np.Labels[naming.LabelManagedBy] != naming.ManagedBy || np.Labels[naming.LabelRuntime] != "bot" {
		t.Errorf("metadata = %+v", np.ObjectMeta)
	}
	if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != rt.UID || ref.Kind != "MemoryRuntime" {
		t.Errorf("controller reference = %+v", ref)
	}
	if sel := specs.RuntimePodSelector(rt); !reflect.DeepEqual(np.Spec.PodSelector, sel) {
		t.Errorf("podSelector = %+v, want the runtime's pods (%+v)", np.Spec.PodSelector, sel)
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes = %v, want Ingress only (egress to PostgreSQL and model endpoints stays open)", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 2 {
		t.Fatalf("ingress = %+v, want two rules (API, metrics)", np.Spec.Ingress)
	}
	rule := np.Spec.Ingress[0]
	if len(rule.Ports) != 1 || *rule.Ports[0].Protocol != corev1.ProtocolTCP || rule.Ports[0].Port.IntValue() != 9090 || rule.Ports[0].EndPort != nil {
		t.Errorf("ports = %+v, want TCP 9090 (spec.service.port)", rule.Ports)
	}
	// One peer, podSelector {} and no namespaceSelector: every pod of the
	// policy's own namespace, nobody else.
	want := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	if !reflect.DeepEqual(rule.From, want) {
		t.Errorf("from = %+v, want %+v", rule.From, want)
	}
}

// Listed peers replace the default; the builder copies them (the runtime
// from the cache must never be changed through the built object).
func TestNetworkPolicyFrom(t *testing.T) {
	rt := testRuntime()
	peers := []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "agents"}}},
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "agent"}}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.8.0.0/16", Except: []string{"10.8.1.0/24"}}},
	}
	rt.Spec.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{Enabled: ptr.To(true), From: peers}
	np := specs.NetworkPolicy(rt, monitoringNamespaces())
	if got := np.Spec.Ingress[0].From; !reflect.DeepEqual(got, peers) {
		t.Errorf("from = %+v, want %+v", got, peers)
	}
	np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] = "changed"
	if rt.Spec.Service.NetworkPolicy.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "agents" {
		t.Error("changing the built NetworkPolicy changed the runtime's spec")
	}
}

func TestNetworkPolicyEnabled(t *testing.T) {
	for _, c := range []struct {
		np   *memoryv1alpha1.MemoryRuntimeNetworkPolicy
		want bool
	}{
		{nil, true},
		{&memoryv1alpha1.MemoryRuntimeNetworkPolicy{}, true},
		{&memoryv1alpha1.MemoryRuntimeNetworkPolicy{Enabled: ptr.To(true)}, true},
		{&memoryv1alpha1.MemoryRuntimeNetworkPolicy{Enabled: ptr.To(false)}, false},
	} {
		rt := testRuntime()
		rt.Spec.Service.NetworkPolicy = c.np
		if got := rt.NetworkPolicyEnabled(); got != c.want {
			t.Errorf("%+v: enabled = %v, want %v", c.np, got, c.want)
		}
		names := map[string]bool{}
		for _, o := range ownedNames(rt) {
			names[o.kind] = true
		}
		if names["NetworkPolicy"] != c.want {
			t.Errorf("%+v: the ownership check covers the NetworkPolicy: %v, want %v", c.np, names["NetworkPolicy"], c.want)
		}
	}
}

// monitoringNamespaces is the default selector of --service-metrics-namespaces.
func monitoringNamespaces() *metav1.LabelSelector { return Options{}.withDefaults().MetricsNamespaces }

// TestNetworkPolicyAdmitsMetricsFromMonitoringOnly: the metrics port is
// admitted from the monitoring namespaces only, never from the API's peers
// (the runtime's namespace, or spec.service.networkPolicy.from), and the
// API port never from the monitoring rule; the selector is the operator's
// setting, copied.
func TestNetworkPolicyAdmitsMetricsFromMonitoringOnly(t *testing.T) {
	for _, c := range []struct {
		name        string
		port        int32
		metricsPort int
		from        []networkingv1.NetworkPolicyPeer
		selector    string
	}{
		{"defaults", 0, 9090, nil, DefaultMetricsNamespaces},
		{"API on 9090", 9090, 9091, nil, DefaultMetricsNamespaces},
		{"peers listed, other selector", 8080, 9090,
			[]networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "agents"}}}},
			"metrics.engram.dev/scrape=true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := testRuntime()
			rt.Spec.Service.Port = c.port
			if c.from != nil {
				rt.Spec.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: c.from}
			}
			sel, err := ParseMetricsNamespaces(c.selector)
			if err != nil {
				t.Fatal(err)
			}
			np := specs.NetworkPolicy(rt, sel)
			var metrics []networkingv1.NetworkPolicyIngressRule
			for _, rule := range np.Spec.Ingress {
				if len(rule.Ports) != 1 || *rule.Ports[0].Protocol != corev1.ProtocolTCP {
					t.Fatalf("rule %+v: want one TCP port per rule", rule)
				}
				switch rule.Ports[0].Port.IntValue() {
				case c.metricsPort:
					metrics = append(metrics, rule)
				case int(rt.ServicePort()):
					if !reflect.DeepEqual(rule.From, rt.NetworkPolicyPeers()) {
						t.Errorf("API port from %+v, want the runtime's peers %+v", rule.From, rt.NetworkPolicyPeers())
					}
				default:
					t.Errorf("a rule admits port %s, neither the API's nor the metrics'", rule.Ports[0].Port.String())
				}
			}
			want := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel}}
			if len(metrics) != 1 || !reflect.DeepEqual(metrics[0].From, want) {
				t.Fatalf("metrics port %d rules %+v, want one admitting %+v only", c.metricsPort, metrics, want)
			}
			if metrics[0].From[0].PodSelector != nil || metrics[0].From[0].IPBlock != nil {
				t.Errorf("the metrics peer admits more than the monitoring namespaces: %+v", metrics[0].From[0])
			}
			metrics[0].From[0].NamespaceSelector.MatchLabels["changed"] = "yes"
			if _, changed := sel.MatchLabels["changed"]; changed {
				t.Error("changing the built NetworkPolicy changed the operator's selector")
			}
			d := specs.Deployment(rt, "img", "hash")
			ports := d.Spec.Template.Spec.Containers[0].Ports
			if len(ports) != 2 || ports[1].Name != naming.MetricsPortName || int(ports[1].ContainerPort) != c.metricsPort {
				t.Errorf("pod ports %+v, want %q on %d", ports, naming.MetricsPortName, c.metricsPort)
			}
		})
	}
}

func TestParseMetricsNamespaces(t *testing.T) {
	for _, bad := range []string{"", "  ", "a=b=c", "in (x)"} {
		if _, err := ParseMetricsNamespaces(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	sel, err := ParseMetricsNamespaces("team in (obs,sre)")
	if err != nil || len(sel.MatchExpressions) != 1 {
		t.Errorf("set-based selector: %+v %v", sel, err)
	}
}

// TestNetworkPolicySelectsJobPods: the runtime's NetworkPolicy selects the
// pods of its memory service and of its maintenance jobs (kube-score:
// "the pod does not have a matching NetworkPolicy" for every Job pod
// before), and no pod of another runtime.
func TestNetworkPolicySelectsJobPods(t *testing.T) {
	rt := testRuntime()
	sel, err := metav1.LabelSelectorAsSelector(&specs.NetworkPolicy(rt, monitoringNamespaces()).Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	cj := specs.CronJob(testRetentionJob(), rt, "img")
	pods := map[string]map[string]string{
		"service pod": specs.Deployment(rt, "img", "h").Spec.Template.Labels,
		"job pod":     cj.Spec.JobTemplate.Spec.Template.Labels,
		"run-now pod": specs.RunNowJob(cj, "x").Spec.Template.Labels,
	}
	for what, l := range pods {
		if !sel.Matches(labels.Set(l)) {
			t.Errorf("the NetworkPolicy does not select the %s (labels %v)", what, l)
		}
	}
	other := testRuntime()
	other.Name = "bot2"
	for what, l := range map[string]map[string]string{
		"service pod": specs.Deployment(other, "img", "h").Spec.Template.Labels,
		"job pod":     specs.CronJob(testRetentionJob(), other, "img").Spec.JobTemplate.Spec.Template.Labels,
	} {
		if sel.Matches(labels.Set(l)) {
			t.Errorf("the NetworkPolicy of bot selects a %s of bot2 (labels %v)", what, l)
		}
	}
}
