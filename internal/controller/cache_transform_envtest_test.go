package controller

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// HIGH 1 of issue 26's thirteenth review: a team labels its own Secrets
// app.kubernetes.io/managed-by=engram-operator and the operator's cache kept
// every byte of them (+63 MiB for 32 of 1 MB). Now it keeps a stub of each,
// and the Secret the operator wrote for a runtime whole.
func TestCacheKeepsLabelledSecretsNotOwnedAsStubs(t *testing.T) {
	const secrets, size = 32, 1_000_000 // bounded: 32 MB in all
	const ns = "team-evil"
	ctx, cfg, c := ownControlPlane(t, 2*time.Minute, ns)
	createLabelledSecrets(ctx, t, c, ns, secrets, size)
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns, UID: "rt-uid"}}
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.CredentialsSecretName(rt.Name),
		Labels: naming.ManagedLabels(), OwnerReferences: []metav1.OwnerReference{runtimeOwnerRef(rt)}},
		Data: map[string][]byte{"password": []byte("kept")}}
	if err := c.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}

	before := heapBytes()
	ca := startOperatorCache(ctx, t, cfg, &corev1.Secret{})
	var list corev1.SecretList
	if err := ca.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	grew := int64(heapBytes()) - int64(before)
	t.Logf("%d labelled Secrets of %d bytes not owned: the cache holds %d objects, heap %+d KiB (2 shared cores)", secrets, size, len(list.Items), grew/1024)
	if len(list.Items) != secrets+1 {
		t.Fatalf("the cache holds %d Secrets, want %d", len(list.Items), secrets+1)
	}
	// The heap also holds the cache's own start (clients, informer): a
	// bound of an eighth of the data is far from both outcomes (before the
	// fix: about twice the data).
	if grew > secrets*size/8 {
		t.Errorf("the cache grew %d KiB for %d labelled Secrets not owned: it keeps their data", grew/1024, secrets)
	}
	for _, s := range list.Items {
		if s.Name == owned.Name {
			if string(s.Data["password"]) != "kept" {
				t.Errorf("the operator's own Secret lost its data: %v", s.Data)
			}
			continue
		}
		if s.Data != nil || !isCacheStub(&s) || len(s.Annotations) != 1 || s.Labels[naming.LabelManagedBy] != naming.ManagedBy {
			t.Errorf("Secret %s: kept data %d keys, annotations %v, labels %v", s.Name, len(s.Data), s.Annotations, s.Labels)
		}
		if b, _ := json.Marshal(&s); len(b) > 1024 {
			t.Errorf("Secret %s: the cache keeps %d bytes of it, want a stub under 1 KiB", s.Name, len(b))
		}
	}
	runtime.KeepAlive(list)
}

// createLabelledSecrets creates n Secrets of size random bytes in ns,
// labelled as Engram's and owned by nobody (the data is not kept past it,
// so the test's heap figure counts the cache only).
func createLabelledSecrets(ctx context.Context, t *testing.T, c client.Client, ns string, n, size int) {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	for i := range n {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("junk-%d", i),
			Labels: naming.ManagedLabels(), Annotations: map[string]string{"a": "b"}}, Data: map[string][]byte{"x": data}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatalf("creating Secret %d: %v", i, err)
		}
	}
}
