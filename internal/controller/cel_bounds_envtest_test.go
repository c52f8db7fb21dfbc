package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// longSelector is a label selector of n expressions of v values each and l
// matchLabels.
func longSelector(n, v, l int) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := range l {
		s.MatchLabels[fmt.Sprintf("l%d", i)] = "x"
	}
	for i := range n {
		e := metav1.LabelSelectorRequirement{Key: fmt.Sprintf("k%d", i), Operator: metav1.LabelSelectorOpIn}
		for j := range v {
			e.Values = append(e.Values, fmt.Sprintf("v%d", j))
		}
		s.MatchExpressions = append(s.MatchExpressions, e)
	}
	return s
}

// manyResources are requirements naming n resources.
func manyResources(n int) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
	for i := range n {
		r.Limits[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = resource.MustParse("1")
	}
	return r
}

// scenarioCELSpecBounds: HIGH 3 of issue 26's fifteenth review. The lists
// and maps of Engram's own fields that the review found unbounded are
// bounded at the API server with messages a person understands; at the
// bounds they are accepted.
func scenarioCELSpecBounds(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "cel-bounds")
	ctx := testContext(t)
	m := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	rj := func(mutate func(*memoryv1alpha1.RetentionJobSpec)) client.Object {
		s := validRetentionSpec()
		mutate(&s)
		return &memoryv1alpha1.RetentionJob{ObjectMeta: m("j"), Spec: s}
	}
	rt := func(mutate func(*memoryv1alpha1.MemoryRuntimeSpec)) client.Object {
		s := validRuntimeSpec()
		mutate(&s)
		return &memoryv1alpha1.MemoryRuntime{ObjectMeta: m("r"), Spec: s}
	}
	selector := func(n, v, l int) func(*memoryv1alpha1.RetentionJobSpec) {
		return func(s *memoryv1alpha1.RetentionJobSpec) { s.RuntimeRef, s.RuntimeSelector = nil, longSelector(n, v, l) }
	}
	placed := func(n, v, l int) func(*memoryv1alpha1.MemoryRuntimeSpec) {
		return func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Database.ClusterConnection, s.Database.DatabaseSelector = "", longSelector(n, v, l)
		}
	}
	for _, obj := range []client.Object{
		rj(selector(16, 64, 64)),
		rj(func(s *memoryv1alpha1.RetentionJobSpec) { r := manyResources(16); s.Resources = &r }),
		rt(placed(16, 64, 64)),
		rt(func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Resources = manyResources(16)
			s.Service.NodeSelector = longSelector(0, 0, 64).MatchLabels
		}),
	} {
		if err := e.c.Create(ctx, obj, client.DryRunAll); err != nil {
			t.Errorf("an object at the bounds was refused: %v", err)
		}
	}
	for _, c := range []celCase{
		{"runtimeSelector of 17 expressions", rj(selector(17, 1, 0)), "spec.runtimeSelector.matchExpressions may hold at most 16 expressions"},
		{"runtimeSelector of 65 values", rj(selector(1, 65, 0)), "each spec.runtimeSelector.matchExpressions entry may list at most 64 values"},
		{"runtimeSelector of 65 labels", rj(selector(0, 0, 65)), "spec.runtimeSelector.matchLabels may hold at most 64 labels"},
		{"retention resources of 17 limits", rj(func(s *memoryv1alpha1.RetentionJobSpec) { r := manyResources(17); s.Resources = &r }),
			"spec.resources may name at most 16 limits, 16 requests and 16 claims"},
		{"databaseSelector of 65 values", rt(placed(1, 65, 0)), "each spec.database.databaseSelector.matchExpressions entry may list at most 64 values"},
		{"databaseSelector of 17 expressions", rt(placed(17, 1, 0)), "spec.database.databaseSelector.matchExpressions may hold at most 16 expressions"},
		{"service resources of 17 limits", rt(func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.Resources = manyResources(17) }),
			"spec.service.resources may name at most 16 limits, 16 requests and 16 claims"},
		{"nodeSelector of 65 labels", rt(func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.NodeSelector = longSelector(0, 0, 65).MatchLabels }),
			"spec.service.nodeSelector: Too many: 65: must have at most 64 items"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := e.c.Create(ctx, c.obj, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with %v\nwant a message containing %q", err, c.want)
			}
		})
	}
}
