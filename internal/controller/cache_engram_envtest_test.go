package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// longAffinity is a required node affinity of n values of 63 bytes: the
// CRD cannot bound corev1.Affinity, so it is valid at any length.
func longAffinity(n int) *corev1.Affinity {
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("%063d", i)
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
}

// HIGH 3 of issue 26's fifteenth review: the cache kept the spec of
// MemoryRuntimes and RetentionJobs whole, and the CRDs leave the embedded
// Kubernetes types unbounded: 24 MemoryRuntimes with a 0.9 MB affinity
// held 1.4 MiB each. An Engram object over the cap is now kept without its
// spec (and marked), so each costs about what a small one does. The figure
// also holds the watch's decoding buffer, grown to the largest object (CRDs
// come as JSON: about 1 MB, once): hence 4 times the cap, not 2.
func TestEngramSpecOverTheCapIsNotKept(t *testing.T) {
	ctx, cfg, c, ns := forgedSetup(t)
	for i := range forgedObjects {
		rt := testRuntime()
		rt.Namespace, rt.UID, rt.Name = ns, "", fmt.Sprintf("rt-%d", i)
		rt.Spec.Service.Affinity = longAffinity(14_000)
		if err := c.Create(ctx, rt); err != nil {
			t.Fatalf("creating MemoryRuntime %d: %v", i, err)
		}
	}
	perObj := heldPerObject(ctx, t, cfg, &memoryv1alpha1.MemoryRuntime{}, &memoryv1alpha1.MemoryRuntimeList{}, ns)
	if perObj > 4*maxEngramHeldBytes {
		t.Errorf("a MemoryRuntime with a 0.9 MB affinity costs %d KiB in the cache, want at most %d", perObj>>10, 4*maxEngramHeldBytes>>10)
	}
}

// scenarioSpecOverBound: a runtime larger than the operator reads gets
// Ready=False saying so and nothing else: no owned object is created from
// its (unread) spec, no tenant, and a RetentionJob does not target it.
// Shortened, it is provisioned as any other.
func scenarioSpecOverBound(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "big-spec")
	ctx := testContext(t)
	rt := newRuntime(ns, "big", "")
	rt.Spec.Service.Affinity = longAffinity(2_000) // about 250 KiB held
	e.createRuntime(t, rt)
	got := e.waitCondition(t, ns, "big", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonSpecTooLarge)
	if msg := got.GetCondition(memoryv1alpha1.ConditionReady).Message; !strings.Contains(msg, "the operator reads at most 64 KiB") {
		t.Errorf("Ready says %q", msg)
	}
	if _, over := specOverBound(got); over || got.Annotations[naming.AnnotationSpecOverBound] != "" {
		t.Error("the cache's mark was written to the API server")
	}
	rj := newRetentionJob(ns, "nightly", "big", "0 3 * * *", "purge")
	mustCreate(t, e.c, rj)
	eventually(t, "the RetentionJob is not Scheduled on the large runtime", 20*time.Second, func() error {
		c := e.retentionJob(t, ns, "nightly").GetCondition(memoryv1alpha1.ConditionScheduled)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != memoryv1alpha1.ReasonSpecTooLarge {
			return fmt.Errorf("Scheduled = %+v", c)
		}
		return nil
	})
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Secret{}, &batchv1.CronJob{}} {
		if err := e.get(t, ns, ownedNameOf(obj, "big"), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T of a runtime over the bound: %v, want none", obj, err)
		}
	}
	if exists, roles := e.tenantState(t, SchemaFor(rt)); exists || roles != 0 {
		t.Errorf("a runtime over the bound was provisioned: schema=%v, %d roles", exists, roles)
	}

	shorten := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"service":{"affinity":null}}}`))
	if err := e.c.Patch(ctx, rt, shorten); err != nil {
		t.Fatal(err)
	}
	e.waitCondition(t, ns, "big", memoryv1alpha1.ConditionDatabaseReady, true, "")
	eventually(t, "the CronJob of the shortened runtime", 20*time.Second, func() error {
		return e.get(t, ns, naming.CronJobName("nightly", "big"), &batchv1.CronJob{})
	})

	// Pushed over the bound again, the runtime keeps its CronJob: the
	// operator deletes nothing for a runtime it cannot read (the
	// sixteenth review of issue 26 saw the RetentionJob prune it).
	affinity, err := json.Marshal(longAffinity(2_000))
	if err != nil {
		t.Fatal(err)
	}
	regrow := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"service":{"affinity":`+string(affinity)+`}}}`))
	if err := e.c.Patch(ctx, rt, regrow); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the RetentionJob is not Scheduled on the regrown runtime", 20*time.Second, func() error {
		c := e.retentionJob(t, ns, "nightly").GetCondition(memoryv1alpha1.ConditionScheduled)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != memoryv1alpha1.ReasonSpecTooLarge {
			return fmt.Errorf("Scheduled = %+v", c)
		}
		return nil
	})
	if err := e.get(t, ns, naming.CronJobName("nightly", "big"), &batchv1.CronJob{}); err != nil {
		t.Errorf("the CronJob of a runtime pushed over the bound: %v, want it kept", err)
	}
}

// ownedNameOf is the name the operator gives its object of obj's kind for
// runtime (the CronJob: of the RetentionJob "nightly").
func ownedNameOf(obj client.Object, runtime string) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return naming.DeploymentName(runtime)
	case *corev1.ConfigMap:
		return naming.ConfigMapName(runtime)
	case *corev1.Secret:
		return naming.CredentialsSecretName(runtime)
	}
	return naming.CronJobName("nightly", runtime)
}
