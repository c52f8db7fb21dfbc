package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// TestAdmissionOf: absent admits none, {} every namespace, a selector its
// matches; an invalid selector or a database kept without its spec admits
// none, and each says why.
func TestAdmissionOf(t *testing.T) {
	ns := labels.Set{"team": "a"}
	d := testDatabase("a", 10)
	d.Spec.AllowedNamespaces = nil
	if sel, why := admissionOf(&d); sel != nil || !strings.Contains(why, "not set") {
		t.Errorf("absent: %v %q", sel, why)
	}
	d.Spec.AllowedNamespaces = &metav1.LabelSelector{}
	if sel, _ := admissionOf(&d); sel == nil || !sel.Matches(ns) || !sel.Matches(labels.Set{}) {
		t.Errorf("{}: %v", sel)
	}
	d.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	if sel, _ := admissionOf(&d); sel == nil || sel.Matches(ns) || !sel.Matches(labels.Set{"team": "b"}) {
		t.Errorf("team=b: %v", sel)
	}
	d.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}
	if sel, why := admissionOf(&d); sel != nil || !strings.Contains(why, "invalid") {
		t.Errorf("invalid: %v %q", sel, why)
	}
	d.Spec.AllowedNamespaces = &metav1.LabelSelector{}
	unread := specOverBoundCopy(&d).(*memoryv1alpha1.MemoryDatabase)
	if sel, why := admissionOf(unread); sel != nil || !strings.Contains(why, "read bound") {
		t.Errorf("kept without spec: %v %q", sel, why)
	}
}

// TestKeepNamespaceLabels: the cache keeps a namespace's name, identity and
// labels only; labels over the bounds are all dropped and the namespace
// marked, and a mark set by anyone else is not kept.
func TestKeepNamespaceLabels(t *testing.T) {
	in := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team-a", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"team": "a"},
		Annotations:   map[string]string{"big": strings.Repeat("x", 1<<20), naming.AnnotationMetadataOverBound: "forged"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	out, err := keepNamespaceLabels(in)
	if err != nil {
		t.Fatal(err)
	}
	ns := out.(*corev1.Namespace)
	if ns.Name != "team-a" || ns.UID != "u1" || ns.ResourceVersion != "7" || ns.Labels["team"] != "a" ||
		len(ns.Annotations) != 0 || ns.ManagedFields != nil || ns.Spec.Finalizers != nil || ns.Status.Phase != "" {
		t.Errorf("kept %+v", ns)
	}
	if held := heldBytes(ns, 1<<20); held > 2<<10 {
		t.Errorf("a namespace of one label holds %d bytes in the cache", held)
	}

	many := map[string]string{}
	for i := range maxEngramLabels + 1 {
		many[fmt.Sprintf("l%03d", i)] = "v"
	}
	in.Labels = many
	out, _ = keepNamespaceLabels(in)
	ns = out.(*corev1.Namespace)
	if ns.Labels != nil || !strings.Contains(ns.Annotations[naming.AnnotationMetadataOverBound], "65 labels") {
		t.Errorf("over the bounds: labels %v, annotations %v", ns.Labels, ns.Annotations)
	}
	req := placementRequest{}
	c := fake.NewClientBuilder().WithObjects(ns).Build()
	if found, err := namespaceOf(t.Context(), c, "team-a", &req); !found || err != nil || req.nsUnread == "" {
		t.Errorf("namespaceOf over the bounds: %v %v %+v", found, err, req)
	}
}

// TestNamespaceLabelsChanged: only a change of labels passes.
func TestNamespaceLabelsChanged(t *testing.T) {
	a := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1", Labels: map[string]string{"team": "a"}}}
	b := a.DeepCopy()
	b.ResourceVersion = "2"
	if namespaceLabelsChanged.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: b}) {
		t.Error("an update without a label change passed")
	}
	b.Labels["team"] = "b"
	if !namespaceLabelsChanged.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: b}) {
		t.Error("a label change did not pass")
	}
	if namespaceLabelsChanged.Create(event.CreateEvent{Object: a}) || namespaceLabelsChanged.Delete(event.DeleteEvent{Object: a}) {
		t.Error("a create or delete passed")
	}
}
