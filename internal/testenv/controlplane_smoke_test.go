package testenv_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestSmokeControlPlane proves the envtest infrastructure: a real
// kube-apiserver + etcd start, the CRDs of config/crd install, and one object
// of each kind is created and read back through the API server.
func TestSmokeControlPlane(t *testing.T) {
	start := time.Now()
	_, cfg := testenv.ControlPlane(t)
	t.Logf("control plane up in %s", time.Since(start).Round(time.Millisecond))

	scheme := runtime.NewScheme()
	if err := memoryv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "default"} }
	objects := []client.Object{
		&memoryv1alpha1.MemoryPolicy{ObjectMeta: meta("smoke")},
		&memoryv1alpha1.MemoryRuntime{ObjectMeta: meta("smoke"), Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: "main"},
		}},
		&memoryv1alpha1.RetentionJob{ObjectMeta: meta("smoke"), Spec: memoryv1alpha1.RetentionJobSpec{
			RuntimeRef: &memoryv1alpha1.LocalObjectReference{Name: "smoke"},
			Schedule:   "0 3 * * *",
			Operations: []memoryv1alpha1.Operation{memoryv1alpha1.OperationExpire, memoryv1alpha1.OperationPurge},
		}},
	}
	for _, obj := range objects {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}

	var policy memoryv1alpha1.MemoryPolicy
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "smoke"}, &policy); err != nil {
		t.Fatal(err)
	}
	if policy.Spec.Dedup.AutoMergeThreshold != 0.95 || policy.Spec.Limits.MaxMemoriesPerOwner != 1000 {
		t.Errorf("policy defaults not applied by the API server: %+v", policy.Spec)
	}

	var rt memoryv1alpha1.MemoryRuntime
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "smoke"}, &rt); err != nil {
		t.Fatal(err)
	}
	if rt.Spec.Database.ClusterConnection != "main" || rt.Spec.Embedding.Dimensions != 384 || rt.Spec.ReclaimPolicy != memoryv1alpha1.ReclaimRetain {
		t.Errorf("runtime read back wrong: %+v", rt.Spec)
	}

	var rj memoryv1alpha1.RetentionJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "smoke"}, &rj); err != nil {
		t.Fatal(err)
	}
	if rj.Spec.Schedule != "0 3 * * *" || len(rj.Spec.Operations) != 2 || rj.Spec.ConcurrencyPolicy != memoryv1alpha1.ConcurrencyForbid {
		t.Errorf("retention job read back wrong: %+v", rj.Spec)
	}

	// The API server enforces the CRD's validation, so an invalid object is refused.
	bad := &memoryv1alpha1.RetentionJob{ObjectMeta: meta("bad"), Spec: memoryv1alpha1.RetentionJobSpec{
		RuntimeRef: &memoryv1alpha1.LocalObjectReference{Name: "smoke"},
		Schedule:   "every night",
		Operations: []memoryv1alpha1.Operation{memoryv1alpha1.OperationExpire},
	}}
	if err := c.Create(ctx, bad); err == nil {
		t.Error("the API server accepted schedule \"every night\"")
	}
}
