package controller

import (
	"context"
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// A stub is what the cache keeps of an object it does not keep whole. It
// must cost a fixed, small number of bytes whoever wrote the object: every
// field it copies is bounded either by the API server (name, namespace,
// Engram's label values, the UID and resource version it assigns) or here.

// Kubernetes' own bounds of the fields an owner reference names: a
// group/version (a DNS subdomain, a slash and a DNS label), a kind (a DNS
// label), an object name (a DNS subdomain) and a UID. The API server checks
// none of them in an owner reference, so a stub checks them itself.
const (
	maxRefAPIVersion = 253 + 1 + 63
	maxRefKind       = 63
	maxRefName       = 253
	maxRefUID        = 128
)

// ownershipStub is an empty object of obj's type with what the ownership
// check reads and reports: identity, Engram's labels, the controller
// reference (when within bounds; without it the object reads as not owned
// and is refused, as it would be anyway). A Job's stub keeps what the
// retention job's status reads of its status, bounded, and not its selector: a manual
// one may hold any number of values, and the Job's pods are found by the
// Job's name label.
func ownershipStub(obj client.Object) client.Object {
	stub := identityOf(obj)
	stub.SetLabels(engramLabelsOnly(obj.GetLabels()))
	stub.SetAnnotations(map[string]string{naming.AnnotationCacheStub: "true"})
	stub.SetOwnerReferences(boundedControllerRef(obj))
	if j, ok := obj.(*batchv1.Job); ok {
		s := stub.(*batchv1.Job)
		s.Status = jobStatusKept(j.Status)
	}
	return stub
}

// Bounds of a Job condition's reason (a CamelCase word) as kept.
const maxConditionReason = 128

// jobStatusKept is what the retention job's status reads of a Job's
// status (times, counts, the Complete and Failed conditions), with the
// conditions' text cut to the length the status reports anyway.
func jobStatusKept(st batchv1.JobStatus) batchv1.JobStatus {
	kept := batchv1.JobStatus{StartTime: st.StartTime, CompletionTime: st.CompletionTime,
		Active: st.Active, Succeeded: st.Succeeded, Failed: st.Failed}
	seen := map[batchv1.JobConditionType]bool{}
	for _, c := range st.Conditions {
		if (c.Type != batchv1.JobComplete && c.Type != batchv1.JobFailed) || seen[c.Type] {
			continue
		}
		seen[c.Type] = true
		c.Reason, c.Message = truncate(c.Reason, maxConditionReason), truncate(c.Message, maxMessage)
		kept.Conditions = append(kept.Conditions, c)
	}
	return kept
}

// boundedControllerRef is obj's controller reference as a list of one, or
// none when a field is over Kubernetes' bounds (no real owner has such a
// reference).
func boundedControllerRef(obj client.Object) []metav1.OwnerReference {
	ctrl := metav1.GetControllerOfNoCopy(obj)
	if ctrl == nil || len(ctrl.APIVersion) > maxRefAPIVersion || len(ctrl.Kind) > maxRefKind ||
		len(ctrl.Name) > maxRefName || len(ctrl.UID) > maxRefUID {
		return nil
	}
	return []metav1.OwnerReference{*ctrl}
}

// isCacheStub reports whether obj is a stub of the cache.
func isCacheStub(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[naming.AnnotationCacheStub]
	return ok
}

// getWhole reads obj (a stub read from the cache) again from the API
// server, whole. That happens for an object of the operator's that is over
// the cache's size cap (someone added to it), at the one read that needs
// its content. found is false when it is gone meanwhile.
func getWhole(ctx context.Context, uncached client.Reader, obj client.Object) (found bool, err error) {
	key := client.ObjectKeyFromObject(obj)
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	return getOptional(ctx, uncached, key, obj)
}

// identityOf is a new object of obj's type that holds only its identity:
// name, namespace, UID, resourceVersion, generation, creation and
// deletion timestamps.
func identityOf(obj client.Object) client.Object {
	o := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	o.SetName(obj.GetName())
	o.SetNamespace(obj.GetNamespace())
	o.SetUID(obj.GetUID())
	o.SetResourceVersion(obj.GetResourceVersion())
	o.SetGeneration(obj.GetGeneration())
	o.SetCreationTimestamp(obj.GetCreationTimestamp())
	o.SetDeletionTimestamp(obj.GetDeletionTimestamp())
	return o
}
