package controller

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// scenarioUserSecretsNotCached: the operator's cache holds Engram's own Secrets
// only — not an unrelated Secret, not even the Secrets a runtime reads
// (connection, API key) — and the runtime still works from those Secrets
// and reacts to their creation and change (metadata-only watch).
func scenarioUserSecretsNotCached(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "secrets")
	ctx := testContext(t)
	unrelated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}, StringData: map[string]string{"token": "not Engram's business"}}
	mustCreate(t, e.c, unrelated)

	rt := newRuntime(ns, "bot", "")
	rt.Spec.Database = memoryv1alpha1.DatabaseSpec{ConnectionSecretRef: &memoryv1alpha1.SecretKeySelector{Name: "pg"}}
	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: "openai", Endpoint: "http://127.0.0.1:9/v1", Model: "m",
		APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "keys"}}
	e.createRuntime(t, rt)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonConnectionSecretNotFound)

	// Nothing requeues a runtime waiting for its Secret: only the watch on
	// Secrets' metadata can wake it.
	pg := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns}, StringData: map[string]string{"uri": e.adminURL}}
	mustCreate(t, e.c, pg)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonSecretNotFound)
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns}, StringData: map[string]string{"apiKey": "sk-one"}}
	mustCreate(t, e.c, keys)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, "")
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// A new API key rolls the pods: the change is seen (watch) and read
	// again (not an old copy).
	hash := e.templateHash(t, ns, "bot")
	update(t, e, keys, func(s *corev1.Secret) { s.Data = map[string][]byte{"apiKey": []byte("sk-two")} })
	eventually(t, "the new API key rolls the pods", 20*time.Second, func() error {
		if e.templateHash(t, ns, "bot") == hash {
			return errors.New("pod template hash unchanged")
		}
		return nil
	})

	// The operator's cache: its own Secrets, nothing else.
	cache := e.mgr.GetCache()
	for _, name := range []string{"unrelated", "pg", "keys"} {
		err := cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("the operator's cache holds the user's Secret %s/%s (err %v)", ns, name, err)
		}
	}
	if err := cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bot-db"}, &corev1.Secret{}); err != nil {
		t.Errorf("the operator's own Secret bot-db is not in its cache: %v", err)
	}
	var cached corev1.SecretList
	if err := cache.List(ctx, &cached); err != nil {
		t.Fatal(err)
	}
	for _, s := range cached.Items {
		if s.Labels[naming.LabelManagedBy] != naming.ManagedBy {
			t.Errorf("the operator's cache holds Secret %s/%s, which is not Engram's", s.Namespace, s.Name)
		}
	}
	if len(cached.Items) == 0 {
		t.Error("the operator's cache holds no Secret at all")
	}
}
