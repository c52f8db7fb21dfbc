package controller

import (
	"strings"

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
// anyone who may create objects in a namespace can set that label: a team
// could make the operator keep hundreds of 1 MB Secrets. keepOwnedWhole is
// the cache's transform for those kinds: an object is kept whole only when
// the operator can tell it wrote it (its controller is a MemoryRuntime or a
// RetentionJob, and its name is the one the operator derives for that
// owner and kind, so at most a few objects per owner); anything else is
// cut to a stub (identity, Engram's labels, the controller reference),
// which is all the ownership check needs to refuse it, as it always did.

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
		cj, ok := obj.(*batchv1.CronJob)
		return ok && cj.Name == naming.CronJobName(ctrl.Name, cj.Labels[naming.LabelRuntime])
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
	return obj, nil
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

// keepEngramAnnotations is the cache's transform for Engram's own kinds
// (MemoryRuntime, MemoryPolicy, RetentionJob, MemoryDatabase): the
// operator reads their spec, labels (selectors) and its own annotations
// (memory.engram.dev/...), never their managed fields or another tool's
// annotations, which their writer sizes (kubectl apply alone copies the
// whole object into one). Cutting them keeps a cached object near its
// spec; how many of them a team may create is a ResourceQuota's to bound
// (docs/security.md). Every write of these objects is a patch computed
// against a copy of the cached object (status.go), so what is cut here is
// never written back.
func keepEngramAnnotations(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	obj.SetManagedFields(nil)
	var kept map[string]string
	for k, v := range obj.GetAnnotations() {
		if strings.HasPrefix(k, naming.AnnotationPrefix) {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	obj.SetAnnotations(kept)
	return obj, nil
}
