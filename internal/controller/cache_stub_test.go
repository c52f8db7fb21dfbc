package controller

import (
	"fmt"
	"math"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// maxStubBytes is what a stub may hold in memory (heldBytes), whoever
// wrote the object.
const maxStubBytes = 8 << 10 // a Job's struct alone is about 4 KiB

// heldSizeOf is the memory obj holds, as the cache estimates it.
func heldSizeOf(t *testing.T, obj client.Object) int {
	t.Helper()
	return heldBytes(obj, math.MaxInt)
}

// adversarialMeta fills obj's metadata the way a tenant can: the longest
// names, a label of Engram's next to thousands of others, big annotations,
// managed fields, and a controller reference of unbounded fields plus
// owners of any number.
func adversarialMeta(obj client.Object, ctrl metav1.OwnerReference) {
	big := strings.Repeat("x", 200<<10)
	obj.SetName(strings.Repeat("n", 253))
	obj.SetNamespace(strings.Repeat("s", 63))
	labels := naming.ManagedLabels()
	labels[naming.LabelRuntime] = strings.Repeat("r", 63)
	for i := range 2000 {
		labels[fmt.Sprintf("l%06d", i)] = strings.Repeat("v", 63)
	}
	obj.SetLabels(labels)
	obj.SetAnnotations(map[string]string{"a": big, naming.AnnotationAppliedHash: big})
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: big}})
	owners := []metav1.OwnerReference{ctrl}
	for i := range 100 {
		owners = append(owners, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("%s%d", big[:2000], i), UID: "u"})
	}
	obj.SetOwnerReferences(owners)
}

// adversarialObjects is one object of every kind the cache transforms,
// with its kind's own room filled too (data, pod templates, a manual
// selector of many values).
func adversarialObjects() []client.Object {
	big := strings.Repeat("x", 300<<10)
	pod := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i",
		Env: []corev1.EnvVar{{Name: "E", Value: big}}}}}}
	values := make([]string, 5000)
	for i := range values {
		values[i] = fmt.Sprintf("v%062d", i)
	}
	return []client.Object{
		&corev1.Secret{Data: map[string][]byte{"x": []byte(big)}, StringData: map[string]string{"y": big}},
		&corev1.ConfigMap{Data: map[string]string{"x": big}},
		&corev1.Service{Spec: corev1.ServiceSpec{ExternalIPs: []string{big}}},
		&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: pod}},
		&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"x": big}}}},
		&policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": big}}}},
		&batchv1.CronJob{Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: pod}}}},
		&batchv1.Job{Spec: batchv1.JobSpec{Template: pod, ManualSelector: ptr.To(true), Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpNotIn, Values: values}}}},
			Status: adversarialJobStatus(big)},
	}
}

// adversarialJobStatus is a Job status with every condition, list and
// string at a size whoever writes it chooses.
func adversarialJobStatus(big string) batchv1.JobStatus {
	st := batchv1.JobStatus{StartTime: &metav1.Time{}, Succeeded: 1, FailedIndexes: ptr.To(big), CompletedIndexes: big,
		UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Failed: []types.UID{types.UID(big)}}}
	for range 10 {
		for _, ty := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed, batchv1.JobSuspended, batchv1.JobConditionType(big)} {
			st.Conditions = append(st.Conditions, batchv1.JobCondition{Type: ty, Status: corev1.ConditionTrue, Reason: big, Message: big})
		}
	}
	return st
}

// HIGH 3 of issue 26's fourteenth review: a stub kept the controller
// reference as written (the API server bounds none of its fields: a 1 MB
// kind) and a Job's manual selector (any number of values), so a "stub"
// could cost a megabyte. Now a stub of any owned kind is under a constant.
func TestCacheStubIsBoundedWhoeverWroteTheObject(t *testing.T) {
	huge := strings.Repeat("k", 900_000)
	refs := map[string]metav1.OwnerReference{
		"huge kind":        {APIVersion: "nowhere.example/v1", Kind: huge, Name: "n", UID: "u", Controller: ptr.To(true)},
		"huge name":        {APIVersion: "memory.engram.dev/v1alpha1", Kind: "MemoryRuntime", Name: huge, UID: "u", Controller: ptr.To(true)},
		"huge uid":         {APIVersion: "batch/v1", Kind: "CronJob", Name: "n", UID: types.UID("u" + huge), Controller: ptr.To(true)},
		"huge api version": {APIVersion: "g" + huge + "/v1", Kind: "K", Name: "n", UID: "u", Controller: ptr.To(true)},
	}
	for what, ref := range refs {
		for _, obj := range adversarialObjects() {
			adversarialMeta(obj, ref)
			stub := ownershipStub(obj)
			if n := heldSizeOf(t, stub); n > maxStubBytes {
				t.Errorf("%s, %T: the stub costs %d bytes, want at most %d", what, obj, n, maxStubBytes)
			}
			if len(stub.GetOwnerReferences()) != 0 {
				t.Errorf("%s, %T: the stub keeps a controller reference over Kubernetes' bounds", what, obj)
			}
			if err := checkOwned("Object", stub, ref); err == nil {
				t.Errorf("%s, %T: the stub passes the ownership check", what, obj)
			}
		}
	}
}

// The stub of an object of Engram's keeps what the ownership check reads:
// a controller reference within Kubernetes' bounds passes it.
func TestCacheStubKeepsAControllerReferenceWithinBounds(t *testing.T) {
	rt := testRuntime()
	for _, obj := range adversarialObjects() {
		adversarialMeta(obj, runtimeOwnerRef(rt))
		stub := ownershipStub(obj)
		if n := heldSizeOf(t, stub); n > maxStubBytes {
			t.Errorf("%T: the stub costs %d bytes, want at most %d", obj, n, maxStubBytes)
		}
		if err := checkOwned("Object", stub, runtimeOwnerRef(rt)); err != nil {
			t.Errorf("%T: the stub of an owned object fails the ownership check: %v", obj, err)
		}
		if stub.GetLabels()[naming.LabelRuntime] != strings.Repeat("r", 63) {
			t.Errorf("%T: the stub lost Engram's labels: %v", obj, stub.GetLabels())
		}
	}
}

// HIGH 1 of issue 26's fourteenth review: a Job whose controller was any
// CronJob (the team's own will do) was kept whole, its pod template of a
// megabyte included. Every Job is now a stub with the bounded part of its
// status the retention job reads; the operator's own run-now Job keeps
// what observeRuns and lastRun read of it.
func TestCacheKeepsEveryJobAsAStub(t *testing.T) {
	rj := testRetentionJob()
	cj := specs.CronJob(rj, testRuntime(), "registry.example/engram:v1")
	cj.UID = "cj-uid"
	own := specs.RunNowJob(cj, "now")
	done := metav1.Now()
	own.Status = batchv1.JobStatus{StartTime: &done, CompletionTime: &done, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "too slow", LastTransitionTime: done}}}
	big := strings.Repeat("x", 900_000)
	foreign := own.DeepCopy()
	foreign.Name = "fake-0"
	foreign.Spec.Template.Spec.Containers[0].Env = append(foreign.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "P", Value: big})
	foreign.Status = adversarialJobStatus(big)

	got, _ := keepOwnedWhole(foreign)
	if n := heldSizeOf(t, got.(client.Object)); n > maxStubBytes {
		t.Errorf("a Job of a CronJob with a %d-byte pod template: the cache keeps %d bytes, want at most %d", len(big), n, maxStubBytes)
	}
	got, _ = keepOwnedWhole(own.DeepCopy())
	j := got.(*batchv1.Job)
	if len(j.Spec.Template.Spec.Containers) != 0 || !isCacheStub(j) {
		t.Errorf("the operator's Job is kept whole: %+v", j.ObjectMeta)
	}
	finished, succeeded, _ := jobOutcome(j)
	if !finished || succeeded || j.Status.Conditions[0].Message != "too slow" || !j.Status.StartTime.Equal(&done) ||
		j.Labels[naming.LabelRetentionJob] != rj.Name || j.Labels[naming.LabelRuntime] != "bot" {
		t.Errorf("the stub of the operator's Job lost what the retention job's status reads: %+v %+v", j.ObjectMeta, j.Status)
	}
	if err := checkOwned("Job", j, *metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))); err != nil {
		t.Errorf("the stub of the operator's Job is not owned: %v", err)
	}
}
