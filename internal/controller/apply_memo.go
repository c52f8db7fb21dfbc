package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// wantHash is the applied hash applyMap stamped on want: it changes with
// anything the operator wants of the object.
func wantHash(want map[string]any) string {
	meta, _ := want["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	h, _ := annotations[naming.AnnotationAppliedHash].(string)
	return h
}

// recallWhole answers for a stub (an owned object over the cache's cap)
// without reading it whole, when the memo says the whole object at the
// stub's resourceVersion already held want. What it returns stands for the
// live object: want's fields (the live object holds them all), the stub's
// identity and version, and the status the object had at that version.
func (a *applier) recallWhole(stub client.Object, want map[string]any, gvk schema.GroupVersionKind) (client.Object, bool, error) {
	e, ok := a.memo.recall(stub.GetUID(), stub.GetResourceVersion(), wantHash(want))
	if !ok {
		return nil, false, nil
	}
	obj, err := a.newObject(gvk)
	if err != nil {
		return nil, false, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(want, obj); err != nil {
		return nil, false, fmt.Errorf("decoding the wanted %s %s: %w", gvk.Kind, stub.GetName(), err)
	}
	obj.SetUID(stub.GetUID())
	obj.SetResourceVersion(stub.GetResourceVersion())
	obj.SetGeneration(stub.GetGeneration())
	obj.SetCreationTimestamp(stub.GetCreationTimestamp())
	obj.SetDeletionTimestamp(stub.GetDeletionTimestamp())
	copyStatus(obj, e.status)
	return obj, true, nil
}

// rememberWhole notes that live, read whole from the API server, holds
// want: the next apply of the same want reads it whole again only after it
// changes.
func (a *applier) rememberWhole(live client.Object, want map[string]any) {
	status, ok := statusOnly(live)
	if !ok {
		return
	}
	a.memo.remember(live.GetUID(), live.GetResourceVersion(), wantHash(want), status)
}
