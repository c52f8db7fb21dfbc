package controller

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// heldBytes is what the cache's caps compare, so it must be near what an
// object really holds: for a few shapes (many empty map entries, one long
// value, the operator's largest object, a long selector, many maps of one
// entry), within 2x of the heap that copies of it take, and never under
// two thirds of it (the sixteenth review of issue 26 found objects of
// one-label selectors and one-entry resource lists estimated at half their
// heap, which let a forged object hold about 120 KiB under a 64 KiB cap).
func TestHeldBytesEstimateIsWithinTwiceTheHeap(t *testing.T) {
	keys := &corev1.Secret{Data: map[string][]byte{}}
	labels := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
	for _, k := range shortKeys(7_000) {
		keys.Data[k] = []byte{}
		labels.Labels["l"+k] = ""
	}
	long := &corev1.ConfigMap{Data: map[string]string{"policy": strings.Repeat("p", 60_000)}}
	selector := testRetentionJob()
	selector.Spec.RuntimeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: make([]string, 2_000)}}}
	for i := range selector.Spec.RuntimeSelector.MatchExpressions[0].Values {
		selector.Spec.RuntimeSelector.MatchExpressions[0].Values[i] = fmt.Sprintf("%063d", i)
	}
	shapes := map[string]client.Object{"empty data keys": keys, "empty labels": labels, "one long value": long,
		"deployment": operatorObjects(t)["deployment"], "long selector": selector,
		"peers of one-label selectors": oneLabelPeers(300), "containers of one-entry resources": oneEntryResources(40)}
	for name, obj := range shapes {
		held, heap := heldBytes(obj, maxWholeObjectBytes<<8), heapPerCopy(t, obj)
		t.Logf("%s: estimated %d bytes, heap %d bytes a copy", name, held, heap)
		if held > 2*heap || 2*heap > 3*held {
			t.Errorf("%s: estimated %d bytes, the heap grows by %d a copy: not within 2/3x to 2x", name, held, heap)
		}
	}
}

// heapPerCopy is the heap that each of 32 copies of obj takes, decoded
// as the cache's are (a deep copy would share the strings).
func heapPerCopy(t *testing.T, obj client.Object) int {
	const copies = 32
	encoded, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	kept := make([]client.Object, copies)
	before := heapBytes()
	for i := range kept {
		kept[i] = reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
		if err := json.Unmarshal(encoded, kept[i]); err != nil {
			t.Fatal(err)
		}
	}
	grew := int(int64(heapBytes()) - int64(before))
	runtime.KeepAlive(kept)
	return grew / copies
}

// oneLabelPeers is a NetworkPolicy of peers that each select namespaces by
// one label: many maps of one entry.
func oneLabelPeers(n int) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}
	for i := range n {
		np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"t": fmt.Sprint(i)}}})
	}
	return np
}

// oneEntryResources is a Deployment of containers that each limit and
// request one resource.
func oneEntryResources(n int) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	for i := range n {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i),
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Mi")}}})
	}
	return d
}
