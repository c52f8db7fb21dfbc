package controller

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// heldBytes is what the cache's caps compare, so it must be near what an
// object really holds: for a few shapes (many empty map entries, one long
// value, the operator's largest object, a long selector), within 2x of the
// heap that copies of it take.
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
		"deployment": operatorObjects(t)["deployment"], "long selector": selector}
	for name, obj := range shapes {
		held, heap := heldBytes(obj, maxWholeObjectBytes<<8), heapPerCopy(t, obj)
		t.Logf("%s: estimated %d bytes, heap %d bytes a copy", name, held, heap)
		if held > 2*heap || heap > 2*held {
			t.Errorf("%s: estimated %d bytes, the heap grows by %d a copy: not within 2x", name, held, heap)
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
