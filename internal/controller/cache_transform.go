package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// The manager's cache selects the owned kinds by the managed-by label, and
// anyone who may create objects in a namespace can set that label, and
// forge a name and a controller reference too: a name check cannot prove
// who wrote an object. So every object the cache keeps costs at most a
// fixed number of bytes, whoever wrote it. keepOwnedWhole is the cache's
// transform for those kinds: an object is kept whole only when it looks
// written by the operator (its controller is a MemoryRuntime or a
// RetentionJob, and its name and labels are the ones the operator gives
// that owner's object of that kind), without managed fields, others'
// annotations and others' labels, and only below maxWholeObjectBytes. Anything else, and
// every Job, is cut to a stub (cache_stub.go), which is all the ownership
// check needs to refuse it, as it always did; how many objects a team may
// create is a ResourceQuota's to bound (docs/security.md).

// ownedNamesOf are the names the operator gives an object of this type
// owned by runtime: what a forged owner reference can claim.
func ownedNamesOf(obj client.Object, runtime string) []string {
	switch obj.(type) {
	case *corev1.Secret:
		return []string{naming.CredentialsSecretName(runtime), naming.APITokenSecretName(runtime)}
	case *corev1.ConfigMap:
		return []string{naming.ConfigMapName(runtime)}
	case *appsv1.Deployment:
		return []string{naming.DeploymentName(runtime)}
	case *corev1.Service:
		return []string{naming.ServiceName(runtime)}
	case *networkingv1.NetworkPolicy:
		return []string{specs.NetworkPolicyName(runtime)}
	case *policyv1.PodDisruptionBudget:
		return []string{naming.PodDisruptionBudgetName(runtime)}
	}
	return nil
}

// writtenByOperator reports whether obj carries the controller reference
// and the name the operator gives the objects it writes.
func writtenByOperator(obj client.Object) bool {
	ctrl := metav1.GetControllerOfNoCopy(obj)
	if ctrl == nil {
		return false
	}
	if ctrl.APIVersion != memoryv1alpha1.GroupVersion.String() {
		return false
	}
	switch ctrl.Kind {
	case "MemoryRuntime":
		for _, n := range ownedNamesOf(obj, ctrl.Name) {
			if obj.GetName() == n {
				return true
			}
		}
	case "RetentionJob":
		// The retention-job label makes a CronJob pruneCronJobs' to delete
		// when it is not one of the RetentionJob's targets.
		cj, ok := obj.(*batchv1.CronJob)
		return ok && cj.Labels[naming.LabelRetentionJob] == ctrl.Name &&
			cj.Name == naming.CronJobName(ctrl.Name, cj.Labels[naming.LabelRuntime])
	}
	return false
}

// keepOwnedWhole is the transform described above. Every Job is a stub:
// the operator reads only a Job's labels, owner and status, and whether a
// Job is one of its CronJobs' cannot be told from the Job (any CronJob of
// the team can own it, and its name is the team's to choose).
func keepOwnedWhole(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	if _, isJob := obj.(*batchv1.Job); isJob || !writtenByOperator(obj) {
		return ownershipStub(obj), nil
	}
	obj.SetManagedFields(nil)
	if a := obj.GetAnnotations(); len(operatorAnnotationsOnly(a)) != len(a) {
		obj.SetAnnotations(operatorAnnotationsOnly(a))
	}
	// The operator writes and compares (matches) only Engram's labels.
	if l := obj.GetLabels(); len(engramLabelsOnly(l)) != len(l) {
		obj.SetLabels(engramLabelsOnly(l))
	}
	if heldBytes(obj, maxWholeObjectBytes) > maxWholeObjectBytes {
		return ownershipStub(obj), nil
	}
	return obj, nil
}

// maxWholeObjectBytes is the most an object kept whole may hold in memory
// (heldBytes, cache_held.go; not its encoding, which a map of many empty
// entries makes 6–10 times smaller): the operator's own objects hold a few
// KiB, so this leaves room for a large policy in a ConfigMap while a name
// and owner, which a team can forge, buy at most this much.
// An object over it (one of the operator's that someone added to) is kept
// as a stub, and the applier reads it from the API server (getWhole).
const maxWholeObjectBytes = 64 << 10

// operatorAnnotationsOnly keeps the annotations the operator writes
// (memory.engram.dev/...; the applier compares applied-hash, the
// credentials check password-sha256), not the cache's own marks.
func operatorAnnotationsOnly(a map[string]string) map[string]string {
	var kept map[string]string
	for k, v := range a {
		if isOperatorAnnotation(k) {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	return kept
}

// engramLabels are the label keys the operator writes and reads.
var engramLabels = []string{
	naming.LabelName, naming.LabelInstance, naming.LabelComponent, naming.LabelManagedBy,
	naming.LabelRuntime, naming.LabelRetentionJob, batchv1.JobNameLabel,
}

// engramLabelsOnly keeps Engram's labels of l (each value at most 63 bytes).
func engramLabelsOnly(l map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range engramLabels {
		if v, ok := l[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
