package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// Which namespaces may use a MemoryDatabase (spec.allowedNamespaces, a
// selector of namespace labels) is decided at placement only: place
// (placement.go) treats a database that does not admit the runtime's
// namespace as ineligible. A tenant already placed is never looked at
// again: a namespace that loses its label keeps its tenants where they
// are, working; only new placements from it are refused.

// admissionOf is the namespace selector of a database for placement, or
// nil and why it admits no namespace.
func admissionOf(db *memoryv1alpha1.MemoryDatabase) (labels.Selector, string) {
	if _, unread := specOverBound(db); unread {
		return nil, "its spec is over the operator's read bound"
	}
	if db.Spec.AllowedNamespaces == nil {
		return nil, "spec.allowedNamespaces is not set: it admits no namespace"
	}
	sel, err := metav1.LabelSelectorAsSelector(db.Spec.AllowedNamespaces)
	if err != nil {
		return nil, "spec.allowedNamespaces is invalid: " + err.Error()
	}
	return sel, ""
}

// namespaceOf fills the request's namespace and labels from the cache.
// found is false while the cache does not hold the namespace yet.
func namespaceOf(ctx context.Context, c client.Reader, ns string, req *placementRequest) (found bool, err error) {
	var obj corev1.Namespace
	found, err = getOptional(ctx, c, client.ObjectKey{Name: ns}, &obj)
	if err != nil || !found {
		if err != nil {
			err = fmt.Errorf("reading namespace %s: %w", ns, err)
		}
		return found, err
	}
	req.namespace, req.nsLabels = ns, labels.Set(obj.Labels)
	if note := obj.Annotations[naming.AnnotationMetadataOverBound]; note != "" {
		req.nsUnread = "the namespace's labels are not read: " + note
	}
	return true, nil
}

// keepNamespaceLabels is the cache's transform for Namespaces: the
// operator reads only their labels (spec.allowedNamespaces), so it keeps
// the name, identity and labels, within the bounds of Engram's own kinds
// (cache_engram.go). Namespaces whose labels are over them are kept
// without labels and marked: no database admits them (a label left out
// could decide a NotIn or DoesNotExist either way).
func keepNamespaceLabels(in any) (any, error) {
	ns, ok := in.(*corev1.Namespace)
	if !ok {
		return in, nil
	}
	kept := &corev1.Namespace{}
	kept.Name, kept.UID, kept.ResourceVersion = ns.Name, ns.UID, ns.ResourceVersion
	kept.DeletionTimestamp = ns.DeletionTimestamp
	budget := maxEngramMetadataBytes
	lbls, dropped := keepWithin(ns.Labels, func(string) bool { return true }, maxEngramLabels, &budget)
	if dropped > 0 {
		kept.Annotations = map[string]string{naming.AnnotationMetadataOverBound: fmt.Sprintf(
			"%d labels, over the operator's bounds (%d labels, %d bytes; docs/security.md)",
			len(ns.Labels), maxEngramLabels, maxEngramMetadataBytes)}
		return kept, nil
	}
	kept.Labels = lbls
	return kept, nil
}

// namespaceLabelsChanged passes only the updates of a Namespace that
// changed its labels (as the cache keeps them): the one change that can
// let a runtime waiting for a placement be placed. Creates (a new
// namespace has no runtime yet; the cache's first list fills it before
// any reconcile), deletes and generic events pass nothing.
var namespaceLabelsChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	DeleteFunc: func(event.DeleteEvent) bool { return false },
	UpdateFunc: func(ev event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(ev.ObjectOld.GetLabels(), ev.ObjectNew.GetLabels()) ||
			ev.ObjectOld.GetAnnotations()[naming.AnnotationMetadataOverBound] != ev.ObjectNew.GetAnnotations()[naming.AnnotationMetadataOverBound]
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// runtimesAwaitingInNamespace maps a Namespace to its runtimes waiting for
// a placement; the placed ones are not reconciled (nothing changes for them).
func (r *MemoryRuntimeReconciler) runtimesAwaitingInNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.listRuntimes(ctx, client.InNamespace(obj.GetName()), client.MatchingFields{indexAwaitingPlacement: "true"})
}
