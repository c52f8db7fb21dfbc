package controller

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// scenarioNetworkPolicy: every runtime gets a NetworkPolicy admitting its
// service port from its own namespace only; spec.service.networkPolicy.from
// replaces the peers, enabled: false deletes it (the operator's own only),
// and a foreign NetworkPolicy of that name is refused like any foreign object.
func scenarioNetworkPolicy(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "netpol")
	ctx := testContext(t)
	rt := e.readyRuntime(t, newRuntime(ns, "bot", ""))

	var np networkingv1.NetworkPolicy
	if err := e.get(t, ns, "bot", &np); err != nil {
		t.Fatalf("no NetworkPolicy for a default runtime: %v", err)
	}
	if !metav1.IsControlledBy(&np, rt) || np.Labels[naming.LabelManagedBy] != naming.ManagedBy ||
		!reflect.DeepEqual(np.Spec.PodSelector, specs.RuntimePodSelector(rt)) ||
		!reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy = %+v", np)
	}
	if got := np.Spec.Ingress; len(got) != 2 || len(got[0].Ports) != 1 || got[0].Ports[0].Port.IntValue() != 8080 ||
		!reflect.DeepEqual(got[0].From, []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}) {
		t.Errorf("ingress = %+v, want TCP 8080 from the runtime's namespace only, then the metrics rule", got)
	}
	// TestNetworkPolicyAdmitsMetricsFromMonitoringOnly, on the live object:
	// the metrics port from the monitoring namespace only.
	monitoring := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}
	if got := np.Spec.Ingress; len(got) != 2 || len(got[1].Ports) != 1 || got[1].Ports[0].Port.IntValue() != 9090 ||
		!reflect.DeepEqual(got[1].From, monitoring) {
		t.Errorf("ingress = %+v, want TCP 9090 (metrics) from namespace monitoring only", got)
	}
	var dep appsv1.Deployment
	if err := e.get(t, ns, "bot", &dep); err != nil {
		t.Fatal(err)
	}
	if ports := dep.Spec.Template.Spec.Containers[0].Ports; len(ports) != 2 || ports[1].Name != naming.MetricsPortName || ports[1].ContainerPort != 9090 {
		t.Errorf("pod ports = %+v, want metrics on 9090", ports)
	}

	// Other namespaces by name, plus the runtime's own.
	from := []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}},
		{PodSelector: &metav1.LabelSelector{}},
	}
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: from}
	})
	eventually(t, "the NetworkPolicy admits the listed peers", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", &np); err != nil {
			return err
		}
		if !reflect.DeepEqual(np.Spec.Ingress[0].From, from) {
			return fmt.Errorf("from = %+v", np.Spec.Ingress[0].From)
		}
		return nil
	})
	if got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, ""); got.Spec.Service.NetworkPolicy.Enabled == nil || !*got.Spec.Service.NetworkPolicy.Enabled {
		t.Errorf("the CRD did not default networkPolicy.enabled to true: %+v", got.Spec.Service.NetworkPolicy)
	}

	// Off: the operator deletes its NetworkPolicy.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.NetworkPolicy.Enabled = ptr.To(false) })
	eventually(t, "the NetworkPolicy is deleted", 20*time.Second, func() error {
		err := e.get(t, ns, "bot", &networkingv1.NetworkPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// Someone else's NetworkPolicy of that name: left alone while off ...
	theirs := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(5432))}},
			}},
		},
	}
	mustCreate(t, e.c, theirs)
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { metav1.SetMetaDataLabel(&r.ObjectMeta, "touched", "1") })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	e.unchanged(t, theirs, &networkingv1.NetworkPolicy{})

	// ... and refused, not overwritten, when the runtime turns its own on.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.NetworkPolicy.Enabled = ptr.To(true) })
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonObjectNotOwned)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionReady).Message, "NetworkPolicy "+ns+"/bot", "not created by Engram"); err != nil {
		t.Error(err)
	}
	e.waitWarning(t, ns, "bot", memoryv1alpha1.ReasonObjectNotOwned, "NetworkPolicy "+ns+"/bot")
	e.unchanged(t, theirs, &networkingv1.NetworkPolicy{})
	if err := e.c.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runtime's own NetworkPolicy is back", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", &np); err != nil {
			return err
		}
		if !metav1.IsControlledBy(&np, got) {
			return errors.New("not the runtime's")
		}
		return nil
	})
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// The peers a user may write are checked by the API server.
	valid := newRuntime(ns, "dry", "")
	valid.Spec.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "agent"}}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
	}}
	if err := e.c.Create(ctx, valid, client.DryRunAll); err != nil {
		t.Errorf("a valid networkPolicy was refused: %v", err)
	}
}
