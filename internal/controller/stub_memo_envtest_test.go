package controller

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// getCounter counts the GET requests a client sends, by URL path.
type getCounter struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *getCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet {
			c.mu.Lock()
			c.paths[req.URL.Path]++
			c.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

// gets returns how many GETs were sent of a path ending in suffix.
func (c *getCounter) gets(suffix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for p, k := range c.paths {
		if strings.HasSuffix(p, suffix) {
			n += k
		}
	}
	return n
}

// A team can push the operator's objects over the cache's cap and make its
// runtime reconcile back to back. The whole object is read from the API
// server once per resourceVersion (and per want), not at every reconcile:
// 20 applies or API token reconciles of an unchanged object over the cap
// send at most one uncached GET of it; a change of it reads it again, and
// drift is still repaired. A stub that is not the operator's is not read
// whole at all.
func TestOverCapObjectIsReadWholeOnlyWhenItChanges(t *testing.T) {
	ctx, cfg, direct := ownControlPlane(t, 3*time.Minute, "")
	scheme := direct.Scheme()
	counter := &getCounter{paths: map[string]int{}}
	countedCfg := rest.CopyConfig(cfg)
	countedCfg.Wrap(counter.wrap)
	counted, err := client.New(countedCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "team-a", UID: "rt-uid"}}
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rt.Namespace}}); err != nil {
		t.Fatal(err)
	}
	ca := startOperatorCache(ctx, t, cfg, &corev1.ConfigMap{}, &corev1.Secret{}, &appsv1.Deployment{})
	cached := cachedClient(t, cfg, ca)
	app := &applier{client: cached, reader: counted, scheme: scheme}
	const reconciles = 20
	overCap := func(t *testing.T, obj client.Object, patch string) {
		t.Helper()
		patchAndWaitForStub(ctx, t, direct, ca, obj, patch)
	}

	t.Run("ConfigMap", func(t *testing.T) {
		desired := func() client.Object { return specs.ConfigMap(rt, []byte("a: b")) }
		if _, _, err := app.apply(ctx, desired()); err != nil {
			t.Fatal(err)
		}
		name := naming.ConfigMapName(rt.Name)
		stubOf := func() client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rt.Namespace, Name: name}}
		}
		overCap(t, stubOf(), `{"data":{"notes":"`+strings.Repeat("n", 200<<10)+`"}}`)
		path := "/configmaps/" + name
		before := counter.gets(path)
		for i := range reconciles {
			live, outcome, err := app.apply(ctx, desired())
			if err != nil || outcome != applyUnchanged {
				t.Fatalf("apply %d over the cap: %v, outcome %q, want unchanged", i, err, outcome)
			}
			if got := live.(*corev1.ConfigMap).Data[naming.KeyConfig]; got != "a: b" {
				t.Fatalf("apply %d returned %q as the config", i, got)
			}
		}
		if n := counter.gets(path) - before; n > 1 {
			t.Fatalf("%d applies of an unchanged ConfigMap over the cap read it whole %d times, want at most 1", reconciles, n)
		}

		// A change of it (a new resourceVersion) is read again.
		overCap(t, stubOf(), `{"data":{"notes":"`+strings.Repeat("m", 200<<10)+`"}}`)
		before = counter.gets(path)
		for range 3 {
			if _, outcome, err := app.apply(ctx, desired()); err != nil || outcome != applyUnchanged {
				t.Fatalf("apply after the team's change: %v, outcome %q", err, outcome)
			}
		}
		if n := counter.gets(path) - before; n != 1 {
			t.Fatalf("after a change the ConfigMap was read whole %d times, want 1", n)
		}
		// Drift in what the operator owns is read and repaired.
		overCap(t, stubOf(), `{"data":{"`+naming.KeyConfig+`":"changed"}}`)
		if _, outcome, err := app.apply(ctx, desired()); err != nil || outcome != applyUpdated {
			t.Fatalf("apply after drift over the cap: %v, outcome %q, want updated", err, outcome)
		}
		// So is a new want.
		if _, outcome, err := app.apply(ctx, specs.ConfigMap(rt, []byte("c: d"))); err != nil || outcome != applyUpdated {
			t.Fatalf("apply of a new config over the cap: %v, outcome %q, want updated", err, outcome)
		}
	})

	t.Run("DeploymentKeepsItsStatus", func(t *testing.T) {
		desired := func() client.Object { return specs.Deployment(rt, "engram:test", "h1") }
		if _, _, err := app.apply(ctx, desired()); err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		key := client.ObjectKey{Namespace: rt.Namespace, Name: rt.Name}
		if err := direct.Get(ctx, key, &d); err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
		if err := direct.Status().Update(ctx, &d); err != nil {
			t.Fatal(err)
		}
		overCap(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
			`{"spec":{"template":{"metadata":{"annotations":{"notes":"`+strings.Repeat("n", 200<<10)+`"}}}}}`)
		before := counter.gets("/deployments/" + rt.Name)
		for i := range reconciles {
			live, outcome, err := app.apply(ctx, desired())
			if err != nil || outcome != applyUnchanged {
				t.Fatalf("apply %d over the cap: %v, outcome %q, want unchanged", i, err, outcome)
			}
			got := live.(*appsv1.Deployment)
			if got.Status.AvailableReplicas != 1 || got.Generation == 0 || got.Status.ObservedGeneration > got.Generation {
				t.Fatalf("apply %d returned generation %d and status %+v, want the live status", i, got.Generation, got.Status)
			}
		}
		if n := counter.gets("/deployments/"+rt.Name) - before; n > 1 {
			t.Fatalf("%d applies of an unchanged Deployment over the cap read it whole %d times, want at most 1", reconciles, n)
		}
	})

	t.Run("APIToken", func(t *testing.T) {
		tokens, signing, err := specs.APITokenContent(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := app.apply(ctx, specs.APITokenSecret(rt, tokens, signing)); err != nil {
			t.Fatal(err)
		}
		name := naming.APITokenSecretName(rt.Name)
		stubOf := func() client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rt.Namespace, Name: name}}
		}
		overCap(t, stubOf(), `{"stringData":{"notes":"`+strings.Repeat("n", 200<<10)+`"}}`)
		r := &MemoryRuntimeReconciler{client: cached, reader: counted, apply: app}
		path := "/secrets/" + name
		before := counter.gets(path)
		for i := range reconciles {
			s := &runtimeScope{rt: rt}
			if _, err := r.reconcileAPIToken(ctx, s); err != nil {
				t.Fatalf("reconcile %d: %v", i, err)
			}
			if rt.Status.APITokenSecret != name {
				t.Fatalf("reconcile %d: status.apiTokenSecret %q", i, rt.Status.APITokenSecret)
			}
		}
		if n := counter.gets(path) - before; n > 1 {
			t.Fatalf("%d API token reconciles of an unchanged Secret over the cap read it whole %d times, want at most 1", reconciles, n)
		}
		overCap(t, stubOf(), `{"stringData":{"notes":"`+strings.Repeat("m", 200<<10)+`"}}`)
		before = counter.gets(path)
		for range 3 {
			if _, err := r.reconcileAPIToken(ctx, &runtimeScope{rt: rt}); err != nil {
				t.Fatal(err)
			}
		}
		if n := counter.gets(path) - before; n != 1 {
			t.Fatalf("after a change the API token Secret was read whole %d times, want 1", n)
		}
		var sec corev1.Secret
		if err := direct.Get(ctx, client.ObjectKey{Namespace: rt.Namespace, Name: name}, &sec); err != nil {
			t.Fatal(err)
		}
		if string(sec.Data[naming.KeyTokens]) != tokens || string(sec.Data[naming.KeySigningKey]) != signing {
			t.Error("the API token reconcile replaced the tokens of a Secret over the cache's cap")
		}
	})

	// The fifteenth review's LOW: a stub of a Secret that is not the
	// operator's (the label, no controller reference) was read whole
	// before the apply refused it.
	t.Run("ForeignAPITokenNotReadWhole", func(t *testing.T) {
		other := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: rt.Namespace, UID: "other-uid"}}
		name := naming.APITokenSecretName(other.Name)
		foreign := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: rt.Namespace, Name: name, Labels: map[string]string{naming.LabelManagedBy: naming.ManagedBy}},
			StringData: map[string]string{"notes": strings.Repeat("n", 200<<10)},
		}
		if err := direct.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		waitForStub(ctx, t, ca, foreign)
		r := &MemoryRuntimeReconciler{client: cached, reader: counted, apply: app}
		before := counter.gets("/secrets/" + name)
		if _, err := r.reconcileAPIToken(ctx, &runtimeScope{rt: other}); asNotOwned(err) == nil {
			t.Fatalf("reconcile over a foreign Secret: %v, want not owned", err)
		}
		if n := counter.gets("/secrets/"+name) - before; n != 0 {
			t.Fatalf("the API token reconcile read a foreign Secret over the cap whole %d times, want 0", n)
		}
	})
}

// waitForStub waits until the cache holds a stub of obj's version.
func waitForStub(ctx context.Context, t *testing.T, ca cache.Cache, obj client.Object) {
	t.Helper()
	for {
		var got corev1.Secret
		if err := ca.Get(ctx, client.ObjectKeyFromObject(obj), &got); err == nil && got.ResourceVersion == obj.GetResourceVersion() {
			if !isCacheStub(&got) {
				t.Fatalf("the cache keeps %s over the cap whole", obj.GetName())
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the cache did not see the Secret")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
