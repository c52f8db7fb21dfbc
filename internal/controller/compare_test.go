package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/engram-dev/engram/internal/naming"
)

func TestIsSubset(t *testing.T) {
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	l := func(items ...any) []any { return items }
	cases := []struct {
		name          string
		desired, live any
		want          bool
	}{
		{"equal scalars", m("a", 1.0), m("a", 1.0), true},
		{"defaulted field in live", m("a", 1.0), m("a", 1.0, "b", "x"), true},
		{"changed scalar", m("a", 1.0), m("a", 2.0), false},
		{"missing field", m("a", 1.0, "b", "x"), m("a", 1.0), false},
		{"empty map matches absent", m("resources", m()), m(), true},
		{"empty string matches absent", m("a", ""), m(), true},
		{"false does not match absent", m("a", false), m(), false},
		{"nested change", m("spec", m("x", m("y", "1"))), m("spec", m("x", m("y", "2"))), false},
		{"named list: extra live item", l(m("name", "a", "v", "1")), l(m("name", "b"), m("name", "a", "v", "1", "d", true)), true},
		{"named list: item changed", l(m("name", "a", "v", "1")), l(m("name", "a", "v", "2")), false},
		{"named list: item missing", l(m("name", "a"), m("name", "c")), l(m("name", "a")), false},
		{"scalar list order matters", l("x", "y"), l("y", "x"), false},
		{"scalar list longer live", l("x"), l("x", "y"), false},
		{"unnamed list item by item", l(m("k", "1")), l(m("k", "1", "d", 0.0)), true},
		{"map vs scalar", m("a", m("b", "c")), m("a", "c"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := isSubset(c.desired, c.live); got != c.want {
				t.Errorf("isSubset(%v, %v) = %v, want %v", c.desired, c.live, got, c.want)
			}
		})
	}
}

// TestMatchesAfterServerDefaults: an applied object that the API server
// returned with defaults and metadata added still matches what was applied,
// and a field the operator no longer sets is noticed through the hash.
func TestMatchesAfterServerDefaults(t *testing.T) {
	desired := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}
	want, err := applyMap(desired, corev1.SchemeGroupVersion.WithKind("Service"))
	if err != nil {
		t.Fatal(err)
	}
	live := desired.DeepCopy()
	live.TypeMeta = metav1.TypeMeta{} // the cache's typed objects have none
	live.ResourceVersion, live.UID = "42", "uid"
	live.Annotations = map[string]string{naming.AnnotationAppliedHash: want["metadata"].(map[string]any)["annotations"].(map[string]any)[naming.AnnotationAppliedHash].(string), "other": "x"}
	live.Spec.ClusterIP = "10.0.0.1"
	live.Spec.Ports[0].Protocol = corev1.ProtocolTCP
	live.Spec.Ports = append(live.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 9})
	ok, err := matches(want, live)
	if err != nil || !ok {
		t.Fatalf("matches = %v, %v; want true (only server defaults and other managers' fields differ)", ok, err)
	}

	live.Spec.Ports[0].Port = 9090
	if ok, _ := matches(want, live); ok {
		t.Error("a changed port was not noticed")
	}

	// The operator stops setting the label: the subset still holds, the hash does not.
	fewer := desired.DeepCopy()
	fewer.Labels = nil
	want2, err := applyMap(fewer, corev1.SchemeGroupVersion.WithKind("Service"))
	if err != nil {
		t.Fatal(err)
	}
	live.Spec.Ports[0].Port = 8080
	if ok, _ := matches(want2, live); ok {
		t.Error("a field the operator no longer sets was not noticed")
	}
}

func TestApplyMapDropsServerFields(t *testing.T) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n", ResourceVersion: "7", UID: "u"}}
	m, err := applyMap(obj, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	meta := m["metadata"].(map[string]any)
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp"} {
		if _, ok := meta[k]; ok {
			t.Errorf("apply configuration keeps metadata.%s", k)
		}
	}
	if m["apiVersion"] != "v1" || m["kind"] != "ConfigMap" {
		t.Errorf("apiVersion/kind = %v/%v", m["apiVersion"], m["kind"])
	}
}
