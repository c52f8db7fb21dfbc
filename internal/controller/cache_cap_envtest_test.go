package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// An object of the operator's that a team made bigger than the cache's cap
// is kept as a stub. The applier then compares with the whole object, read
// from the API server: a reconcile writes nothing when nothing the operator
// owns changed (no write, no event, on every reconcile), and still repairs
// what did. The API token reconcile reads the tokens whole too, so it does
// not take them for missing.
func TestOperatorsObjectOverTheCacheCapIsNotRewrittenEachReconcile(t *testing.T) {
	ctx, cfg, direct := ownControlPlane(t, 2*time.Minute, "")
	scheme := direct.Scheme()
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "team-a", UID: "rt-uid"}}
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rt.Namespace}}); err != nil {
		t.Fatal(err)
	}
	ca := startOperatorCache(ctx, t, cfg, &corev1.ConfigMap{}, &corev1.Secret{})
	cached := cachedClient(t, cfg, ca)
	app := &applier{client: cached, reader: direct, scheme: scheme}
	desired := func() client.Object { return specs.ConfigMap(rt, []byte("a: b")) }
	if _, outcome, err := app.apply(ctx, desired()); err != nil || outcome != applyCreated {
		t.Fatalf("first apply: %v, %q", err, outcome)
	}
	// The team adds 200 KiB with a field manager of its own.
	addition := `{"data":{"notes":"` + strings.Repeat("n", 200<<10) + `"}}`
	key := client.ObjectKey{Namespace: rt.Namespace, Name: naming.ConfigMapName(rt.Name)}
	rv := patchAndWaitForStub(ctx, t, direct, ca, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, addition)

	for i := range 3 {
		if _, outcome, err := app.apply(ctx, desired()); err != nil || outcome != applyUnchanged {
			t.Fatalf("apply %d over the cap: %v, outcome %q, want unchanged", i, err, outcome)
		}
	}
	var now corev1.ConfigMap
	if err := direct.Get(ctx, key, &now); err != nil || now.ResourceVersion != rv {
		t.Fatalf("the ConfigMap was written: resourceVersion %s, was %s (%v)", now.ResourceVersion, rv, err)
	}

	// Drift in what the operator owns is still repaired.
	patchAndWaitForStub(ctx, t, direct, ca, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		`{"data":{"`+naming.KeyConfig+`":"changed"}}`)
	if _, outcome, err := app.apply(ctx, desired()); err != nil || outcome != applyUpdated {
		t.Fatalf("apply after drift over the cap: %v, outcome %q, want updated", err, outcome)
	}

	// The API token Secret over the cap: its tokens are read whole.
	tokens, signing, err := specs.APITokenContent(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := app.apply(ctx, specs.APITokenSecret(rt, tokens, signing)); err != nil {
		t.Fatal(err)
	}
	tokenKey := client.ObjectKey{Namespace: rt.Namespace, Name: naming.APITokenSecretName(rt.Name)}
	patchAndWaitForStub(ctx, t, direct, ca, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tokenKey.Namespace, Name: tokenKey.Name}},
		`{"stringData":{"notes":"`+strings.Repeat("n", 200<<10)+`"}}`)
	r := &MemoryRuntimeReconciler{client: cached, reader: direct, apply: app}
	if _, err := r.reconcileAPIToken(ctx, &runtimeScope{rt: rt}); err != nil {
		t.Fatal(err)
	}
	var sec corev1.Secret
	if err := direct.Get(ctx, tokenKey, &sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data[naming.KeyTokens]) != tokens || string(sec.Data[naming.KeySigningKey]) != signing {
		t.Error("the API token reconcile replaced the tokens of a Secret over the cache's cap")
	}
}

// patchAndWaitForStub merge-patches the object at key as another field
// manager and waits until the cache holds a stub of that version.
func patchAndWaitForStub(ctx context.Context, t *testing.T, direct client.Client, ca cache.Cache, obj client.Object, patch string) string {
	t.Helper()
	if err := direct.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("team")); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(obj)
	for {
		got := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
		if err := ca.Get(ctx, key, got); err == nil && got.GetResourceVersion() == obj.GetResourceVersion() {
			if !isCacheStub(got) {
				t.Fatalf("the cache keeps %s over the cap whole", key)
			}
			return obj.GetResourceVersion()
		}
		select {
		case <-ctx.Done():
			t.Fatal("the cache did not see the patch")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
