package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/testenv"
)

// ownControlPlane is the start of the cache tests that run outside
// TestOperator: a control plane of the test's own, a context that ends
// after timeout (or with the test), and a client of the operator's scheme
// with no cache. With ns set, it creates that namespace first.
func ownControlPlane(t *testing.T, timeout time.Duration, ns string) (context.Context, *rest.Config, client.Client) {
	t.Helper()
	_, cfg := testenv.ControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if ns != "" {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, cfg, c
}

// startMetadataCache starts a cache of Secrets' metadata of scheme with
// the operator's transform (keepIdentityOnly), and waits until it synced; it
// stops with ctx.
func startMetadataCache(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme) cache.Cache {
	t.Helper()
	meta, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultTransform: keepIdentityOnly})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.GetInformer(ctx, secretMetadata()); err != nil {
		t.Fatal(err)
	}
	go func() { _ = meta.Start(ctx) }()
	if !meta.WaitForCacheSync(ctx) {
		t.Fatal("the metadata cache did not sync")
	}
	return meta
}
