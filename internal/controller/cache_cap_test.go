package controller

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// cachedSize is what the cache keeps of obj, encoded.
func cachedSize(t *testing.T, obj client.Object) (int, client.Object) {
	t.Helper()
	got, err := keepOwnedWhole(obj)
	if err != nil {
		t.Fatal(err)
	}
	kept := got.(client.Object)
	return heldSizeOf(t, kept), kept
}

// MEDIUM 2 of issue 26's fourteenth review: a team can add to the
// operator's own objects (a key, labels, annotations, field managers), and
// the cache kept them whole with every addition. Now what the operator
// does not write is cut (others' annotations and labels, managed fields), and an
// object still over the cap is a stub.
func TestCacheKeepsTheOperatorsObjectsWithinTheCapWhateverIsAdded(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	for name, obj := range operatorObjects(t) {
		noted := obj.DeepCopyObject().(client.Object)
		noted.SetAnnotations(map[string]string{"tool.example/notes": big, naming.AnnotationAppliedHash: "h"})
		noted.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: big}})
		n, kept := cachedSize(t, noted)
		if isCacheStub(kept) || n > maxWholeObjectBytes || kept.GetAnnotations()[naming.AnnotationAppliedHash] != "h" {
			t.Errorf("%s with others' annotations: kept %d bytes (stub %v), annotations %d", name, n, isCacheStub(kept), len(kept.GetAnnotations()))
		}

		labelled := obj.DeepCopyObject().(client.Object)
		labels := labelled.GetLabels()
		for i := range 12_000 {
			labels[fmt.Sprintf("l%08d", i)] = strings.Repeat("v", 63)
		}
		if n, kept := cachedSize(t, labelled); n > maxWholeObjectBytes || len(kept.GetLabels()) != len(obj.GetLabels()) {
			t.Errorf("%s with 12000 labels: kept %d bytes and %d labels, want Engram's %d", name, n, len(kept.GetLabels()), len(obj.GetLabels()))
		}
	}
}

// HIGH 2 of issue 26's fourteenth review: the name nightly-<runtime>
// with a runtime label of the team's choice let one RetentionJob vouch for
// any number of CronJobs of a megabyte, kept whole. A CronJob kept whole
// now also carries the RetentionJob's label (so pruneCronJobs deletes it
// when it is no target) and is under the cap.
func TestCacheKeepsNoCronJobOfARetentionJobOverTheCap(t *testing.T) {
	rj := testRetentionJob()
	ref := metav1.OwnerReference{APIVersion: memoryv1alpha1.GroupVersion.String(), Kind: "RetentionJob", Name: rj.Name, UID: rj.UID, Controller: ptr.To(true)}
	forged := func(i int, retentionLabel bool, payload string) *batchv1.CronJob {
		labels := naming.ManagedLabels()
		labels[naming.LabelRuntime] = fmt.Sprintf("r%d", i)
		if retentionLabel {
			labels[naming.LabelRetentionJob] = rj.Name
		}
		return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: naming.CronJobName(rj.Name, labels[naming.LabelRuntime]),
			Namespace: "team-a", Labels: labels, OwnerReferences: []metav1.OwnerReference{ref}},
			Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplateCarrying(payload)}}}}
	}
	if _, kept := cachedSize(t, forged(0, false, "small")); !isCacheStub(kept) {
		t.Error("a CronJob without the RetentionJob's label is kept whole")
	}
	if n, kept := cachedSize(t, forged(1, true, strings.Repeat("c", 900_000))); !isCacheStub(kept) || n > maxStubBytes {
		t.Errorf("a CronJob with a 900000-byte job template: kept %d bytes, want a stub", n)
	}
	if _, kept := cachedSize(t, forged(2, true, "small")); isCacheStub(kept) {
		t.Error("a small CronJob named and labelled for its RetentionJob is a stub")
	}
}

// HIGH 4 of issue 26's fourteenth review: a Secret named <ghost>-db with
// a controller reference to a MemoryRuntime ghost that need not exist was
// kept whole, its megabyte of data included. The cap bounds it whatever
// its name says.
func TestCacheKeepsNoSecretOfAForgedRuntimeOverTheCap(t *testing.T) {
	for i := range 3 {
		rt := fmt.Sprintf("ghost%d", i)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: naming.CredentialsSecretName(rt),
			Labels: naming.ManagedLabels(), OwnerReferences: []metav1.OwnerReference{
				{APIVersion: memoryv1alpha1.GroupVersion.String(), Kind: "MemoryRuntime", Name: rt, UID: "forged", Controller: ptr.To(true)},
				{APIVersion: "nowhere.example/v1", Kind: "Anchor", Name: "a", UID: "a"}}},
			Data: map[string][]byte{"x": []byte(strings.Repeat("s", 900_000))}}
		if n, kept := cachedSize(t, s); !isCacheStub(kept) || n > maxStubBytes {
			t.Errorf("Secret %s of 900000 bytes: kept %d bytes, want a stub", s.Name, n)
		}
	}
}

// podTemplateCarrying is a pod template with payload in an env value.
func podTemplateCarrying(payload string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "c", Image: "busybox", Env: []corev1.EnvVar{{Name: "PAYLOAD", Value: payload}}}}}}
}
