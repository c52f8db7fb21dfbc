package controller

import (
	"testing"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// HIGH 3 of issue 26's fifteenth review, in the transform: an Engram
// object over the cap is kept without its spec, with its identity, status
// and the operator's finalizer, and marked with its size; a mark someone
// wrote on an object within the cap is not kept.
func TestEngramSpecOverTheCapIsKeptReducedAndMarked(t *testing.T) {
	rt := testRuntime()
	rt.Labels = map[string]string{"team": "a"}
	rt.Finalizers = []string{naming.Finalizer, "team.example/other"}
	rt.Status.Database = &memoryv1alpha1.RuntimeDatabase{Name: "db-a"}
	rt.Spec.Service.Affinity = longAffinity(2_000)
	out, _ := keepEngramAnnotations(rt.DeepCopy())
	got := out.(*memoryv1alpha1.MemoryRuntime)
	held, over := specOverBound(got)
	if !over || held < maxEngramHeldBytes || heldSizeOf(t, got) > maxEngramHeldBytes/4 {
		t.Fatalf("kept %d bytes, mark %v (%d bytes)", heldSizeOf(t, got), over, held)
	}
	if got.Spec.Service.Affinity != nil || got.Name != rt.Name || got.UID != rt.UID || got.PlacedDatabase() != "db-a" ||
		len(got.Finalizers) != 1 || got.Labels["team"] != "a" {
		t.Errorf("the reduced copy: %+v", got.ObjectMeta)
	}

	small := testRetentionJob()
	small.Annotations = map[string]string{naming.AnnotationSpecOverBound: "999999"}
	out, _ = keepEngramAnnotations(small)
	if _, over := specOverBound(out.(*memoryv1alpha1.RetentionJob)); over {
		t.Error("a forged mark was kept")
	}
}
