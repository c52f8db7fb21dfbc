package controller

import (
	"math"
	"reflect"
	"slices"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// maxEngramHeldBytes is the most an Engram object may hold in the cache
// (heldBytes, after the metadata bounds). The CRDs bound most of a spec,
// but not the Kubernetes types they embed (affinity, tolerations, ...):
// the samples hold a few KiB, so this leaves a large margin while a team
// cannot make the operator hold megabytes per object it creates.
const maxEngramHeldBytes = 64 << 10

// specOverBoundCopy is what the cache keeps of an Engram object over
// maxEngramHeldBytes: identity, its bounded labels and annotations, the
// operator's finalizer and its status (the operator writes it), no spec,
// and the mark AnnotationSpecOverBound with the size. No reconciler
// acts on its spec (an empty spec would read as defaults): see
// refuseSpecOverBound.
func specOverBoundCopy(obj client.Object) client.Object {
	held := heldBytes(obj, math.MaxInt)
	kept := identityOf(obj)
	kept.SetLabels(obj.GetLabels())
	if slices.Contains(obj.GetFinalizers(), naming.Finalizer) {
		kept.SetFinalizers([]string{naming.Finalizer})
	}
	annotations := map[string]string{naming.AnnotationSpecOverBound: strconv.Itoa(held)}
	for k, v := range obj.GetAnnotations() {
		annotations[k] = v
	}
	kept.SetAnnotations(annotations)
	status := reflect.ValueOf(obj).Elem().FieldByName("Status")
	reflect.ValueOf(kept).Elem().FieldByName("Status").Set(status)
	return kept
}

// specOverBound reports whether obj is the cache's reduced copy of an
// object over maxEngramHeldBytes, and its size as the cache estimated it.
func specOverBound(obj client.Object) (held int, over bool) {
	v, over := obj.GetAnnotations()[naming.AnnotationSpecOverBound]
	if !over {
		return 0, false
	}
	held, _ = strconv.Atoi(v)
	return held, true
}
