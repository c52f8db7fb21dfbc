package controller

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// The bounds the cache keeps of an Engram object's metadata: the same the
// admission policy config/admission/metadata-bounds.yaml refuses beyond,
// so they bite only where that policy is not installed.
const (
	maxEngramLabels        = 64
	maxEngramMetadataBytes = 16 << 10 // labels and memory.engram.dev/ annotations, keys and values
)

// keepEngramAnnotations is the cache's transform for Engram's own kinds
// (MemoryRuntime, MemoryPolicy, RetentionJob, MemoryDatabase): the
// operator reads their spec, labels (selectors) and its own annotations
// (memory.engram.dev/...), never their managed fields or another tool's
// annotations, which their writer sizes (kubectl apply alone copies the
// whole object into one). Labels and the operator's annotations are kept
// up to the bounds above, in key order; what is over them is not kept, and
// the copy is marked (AnnotationMetadataOverBound) so the object's Ready
// condition says so. How many of these objects a team may create is a
// ResourceQuota's to bound (docs/security.md). Every write of these
// objects is a patch computed against a copy of the cached object
// (status.go), so what is cut here is never written back.
func keepEngramAnnotations(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	obj.SetManagedFields(nil)
	budget := maxEngramMetadataBytes
	labels, droppedLabels := keepWithin(obj.GetLabels(), func(string) bool { return true }, maxEngramLabels, &budget)
	annotations, droppedAnnotations := keepWithin(obj.GetAnnotations(), isOperatorAnnotation, len(obj.GetAnnotations()), &budget)
	obj.SetLabels(labels)
	if droppedLabels+droppedAnnotations > 0 {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[naming.AnnotationMetadataOverBound] = fmt.Sprintf(
			"%d labels and %d memory.engram.dev/ annotations not read: over the operator's bounds (%d labels, %d bytes; docs/security.md)",
			droppedLabels, droppedAnnotations, maxEngramLabels, maxEngramMetadataBytes)
	}
	obj.SetAnnotations(annotations)
	if heldBytes(obj, maxEngramHeldBytes) > maxEngramHeldBytes {
		return specOverBoundCopy(obj), nil
	}
	return obj, nil
}

// isOperatorAnnotation: the operator's annotations, not the marks only its
// cache sets (which no one may set for it).
func isOperatorAnnotation(k string) bool {
	return strings.HasPrefix(k, naming.AnnotationPrefix) && k != naming.AnnotationCacheStub &&
		k != naming.AnnotationMetadataOverBound && k != naming.AnnotationSpecOverBound
}

// keepWithin keeps, in key order, the entries of m that pass keep, at most
// n of them and within *budget bytes (which it spends); dropped counts the
// passing entries not kept.
func keepWithin(m map[string]string, keep func(string) bool, n int, budget *int) (kept map[string]string, dropped int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if keep(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		size := len(k) + len(m[k])
		if len(kept) >= n || size > *budget {
			dropped++
			continue
		}
		if kept == nil {
			kept = map[string]string{}
		}
		kept[k], *budget = m[k], *budget-size
	}
	return kept, dropped
}

// conditioned is an Engram object with conditions.
type conditioned interface {
	client.Object
	GetCondition(condType string) *metav1.Condition
}

// noteMetadataOverBound adds to obj's Ready condition what the cache did
// not keep of its metadata (called after the status is derived).
func noteMetadataOverBound(obj conditioned) {
	note := obj.GetAnnotations()[naming.AnnotationMetadataOverBound]
	ready := obj.GetCondition(memoryv1alpha1.ConditionReady)
	if note == "" || ready == nil || strings.Contains(ready.Message, note) {
		return
	}
	ready.Message += "; " + note
}
