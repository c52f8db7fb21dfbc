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
	"github.com/engram-dev/engram/internal/naming"
)

// The default NetworkPolicy admits the service port from the runtime's own
// namespace and nothing else, on the runtime's pods only.
func TestNetworkPolicyDefault(t *testing.T) {
	rt := testRuntime()
	if !rt.NetworkPolicyEnabled() {
		t.Fatal("a runtime without spec.service.networkPolicy must get a NetworkPolicy")
	}
	np := NetworkPolicy(rt)
	if np.Name != "bot" || np.Namespace != "team-a" || np.Labels[naming.LabelManagedBy] != naming.ManagedBy || np.Labels[naming.LabelRuntime] != "bot" {
		t.Errorf("metadata = %+v", np.ObjectMeta)
	}
	if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != rt.UID || ref.Kind != "MemoryRuntime" {
		t.Errorf("controller reference = %+v", ref)
	}
	if sel := RuntimePodSelector(rt); !reflect.DeepEqual(np.Spec.PodSelector, sel) {
		t.Errorf("podSelector = %+v, want the runtime's pods (%+v)", np.Spec.PodSelector, sel)
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes = %v, want Ingress only (egress to PostgreSQL and model endpoints stays open)", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 {
		t.Fatalf("ingress = %+v, want one rule", np.Spec.Ingress)
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
	np := NetworkPolicy(rt)
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

// TestNetworkPolicySelectsJobPods: the runtime's NetworkPolicy selects the
// pods of its memory service and of its maintenance jobs (kube-score:
// "the pod does not have a matching NetworkPolicy" for every Job pod
// before), and no pod of another runtime.
func TestNetworkPolicySelectsJobPods(t *testing.T) {
	rt := testRuntime()
	sel, err := metav1.LabelSelectorAsSelector(&NetworkPolicy(rt).Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	cj := CronJob(testRetentionJob(), rt, "img")
	pods := map[string]map[string]string{
		"service pod": Deployment(rt, "img", "h").Spec.Template.Labels,
		"job pod":     cj.Spec.JobTemplate.Spec.Template.Labels,
		"run-now pod": RunNowJob(cj, "x").Spec.Template.Labels,
	}
	for what, l := range pods {
		if !sel.Matches(labels.Set(l)) {
			t.Errorf("the NetworkPolicy does not select the %s (labels %v)", what, l)
		}
	}
	other := testRuntime()
	other.Name = "bot2"
	for what, l := range map[string]map[string]string{
		"service pod": Deployment(other, "img", "h").Spec.Template.Labels,
		"job pod":     CronJob(testRetentionJob(), other, "img").Spec.JobTemplate.Spec.Template.Labels,
	} {
		if sel.Matches(labels.Set(l)) {
			t.Errorf("the NetworkPolicy of bot selects a %s of bot2 (labels %v)", what, l)
		}
	}
}
