package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// Every object the operator writes stays whole in its cache (the applier
// compares it with what it wants, the reconciles read the Secrets' data):
// a stub of one would cost a read from the API server on every reconcile.
// Each is far below the cap on whole objects.
func TestCacheKeepsWholeEveryObjectTheOperatorWrites(t *testing.T) {
	for name, obj := range operatorObjects(t) {
		want := obj.DeepCopyObject()
		got, _ := keepOwnedWhole(obj)
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: the operator's own object was changed in the cache", name)
		}
		if n := heldSizeOf(t, obj); n > maxWholeObjectBytes/4 {
			t.Errorf("%s: %d bytes, too close to the cache's cap of %d", name, n, maxWholeObjectBytes)
		}
	}
}

// operatorObjects are the objects the operator writes, by name, as the
// builders make them (the Secret with its password digest annotation).
func operatorObjects(t *testing.T) map[string]client.Object {
	t.Helper()
	rt := testRuntime()
	creds, err := specs.LoginCredentials("postgres://admin:secret@db.example:5432/app", "engram_team_a_bot", "pw")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]client.Object{
		"deployment":  specs.Deployment(rt, "registry.example/engram:v1", "hash"),
		"service":     specs.Service(rt),
		"configmap":   specs.ConfigMap(rt, []byte("a: b")),
		"credentials": specs.CredentialsSecret(rt, creds),
		"api-token":   specs.APITokenSecret(rt, "admin:digest", "key"),
		"netpol":      specs.NetworkPolicy(rt, nil),
		"pdb":         specs.PodDisruptionBudget(rt),
		"cronjob":     specs.CronJob(testRetentionJob(), rt, "registry.example/engram:v1"),
	}
}

// HIGH 1 of issue 26's thirteenth review, by object: the label and even a
// controller reference to a runtime prove nothing unless the name is the
// one the operator gives that runtime's object of that kind.
func TestCacheKeepsStubsOfObjectsTheOperatorDidNotWrite(t *testing.T) {
	rt := testRuntime()
	big := strings.Repeat("x", 1<<20)
	forged := func(name string, owners ...metav1.OwnerReference) *corev1.Secret {
		labels := naming.ManagedLabels()
		labels["junk"] = "y"
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rt.Namespace, UID: "u", ResourceVersion: "7",
				Labels: labels, Annotations: map[string]string{"a": big}, OwnerReferences: owners,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Data: map[string][]byte{"x": []byte(big)}, StringData: map[string]string{"y": big},
		}
	}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "c", Controller: ptr.To(true)}
	for name, s := range map[string]*corev1.Secret{
		"no owner":              forged("junk"),
		"runtime, another name": forged("junk", runtimeOwnerRef(rt)),
		"another owner":         forged(naming.CredentialsSecretName(rt.Name), other),
	} {
		got, _ := keepOwnedWhole(s)
		stub := got.(*corev1.Secret)
		if stub.Data != nil || stub.StringData != nil || len(stub.Annotations) != 1 || !isCacheStub(stub) || stub.ManagedFields != nil {
			t.Errorf("%s: the cache keeps data or annotations", name)
		}
		if stub.Name != s.Name || stub.Namespace != s.Namespace || stub.UID != "u" || stub.ResourceVersion != "7" ||
			len(stub.Labels) != len(naming.ManagedLabels()) || len(stub.OwnerReferences) != len(s.OwnerReferences) {
			t.Errorf("%s: the stub lost what the ownership check reads: %+v", name, stub.ObjectMeta)
		}
		if len(s.OwnerReferences) > 0 {
			if err := checkOwned("Secret", stub, runtimeOwnerRef(rt)); err == nil && name != "runtime, another name" {
				t.Errorf("%s: the stub passes the ownership check", name)
			}
		}
	}
}

// Engram's own kinds are cached without their managed fields and others'
// annotations (kubectl apply's copy of the object, a tool's notes), which
// whoever writes the object sizes; the operator's annotations and the
// labels and spec it reads stay.
func TestEngramKindsCachedWithoutOthersAnnotations(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{
		Name: "r", Namespace: "team-a", Labels: map[string]string{"team": "a"},
		Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 200<<10),
			naming.AnnotationRunNow:                            "now",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	rt.Spec.Embedding.Dimensions = 8
	out, err := keepEngramAnnotations(rt)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*memoryv1alpha1.MemoryRuntime)
	if len(got.Annotations) != 1 || got.Annotations[naming.AnnotationRunNow] != "now" {
		t.Errorf("kept annotations %d, want only the operator's", len(got.Annotations))
	}
	if got.ManagedFields != nil || got.Labels["team"] != "a" || got.Spec.Embedding.Dimensions != 8 {
		t.Errorf("kept managed fields %v, labels %v, dimensions %d", got.ManagedFields, got.Labels, got.Spec.Embedding.Dimensions)
	}
}

// HIGH 5 of issue 26's fourteenth review, where the admission policy is
// not installed: a RetentionJob with 12,000 labels was cached with every
// one of them. The cache keeps at most 64 labels and 16 KiB of labels and
// memory.engram.dev/ annotations, marks what it did not keep, and the
// Ready condition says so; a mark someone wrote is not kept.
func TestEngramKindsCachedWithBoundedLabels(t *testing.T) {
	rj := testRetentionJob()
	rj.Labels = map[string]string{}
	for i := range 12_000 {
		rj.Labels[fmt.Sprintf("l%08d", i)] = strings.Repeat("v", 63)
	}
	rj.Annotations = map[string]string{naming.AnnotationRunNow: "now", naming.AnnotationMetadataOverBound: "forged"}
	out, _ := keepEngramAnnotations(rj)
	got := out.(*memoryv1alpha1.RetentionJob)
	if b, _ := json.Marshal(got); len(got.Labels) > maxEngramLabels || len(b) > 2*maxEngramMetadataBytes {
		t.Errorf("kept %d labels, %d bytes encoded", len(got.Labels), len(b))
	}
	note := got.Annotations[naming.AnnotationMetadataOverBound]
	if !strings.Contains(note, "11936 labels") || got.Annotations[naming.AnnotationRunNow] != "now" {
		t.Errorf("annotations kept: %v", got.Annotations)
	}
	got.SetCondition(memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonCronJobsReady, "CronJob nightly-bot")
	noteMetadataOverBound(got)
	if msg := got.GetCondition(memoryv1alpha1.ConditionReady).Message; !strings.HasSuffix(msg, note) {
		t.Errorf("Ready says %q, want the note", msg)
	}

	fine := testRetentionJob()
	fine.Labels = map[string]string{"team": "a"}
	fine.Annotations = map[string]string{naming.AnnotationMetadataOverBound: "forged", naming.AnnotationCacheStub: "true"}
	out, _ = keepEngramAnnotations(fine)
	if got := out.(*memoryv1alpha1.RetentionJob); len(got.Annotations) != 0 || got.Labels["team"] != "a" {
		t.Errorf("an object within bounds: kept labels %v, annotations %v", got.Labels, got.Annotations)
	}
}
