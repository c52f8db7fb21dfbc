package specs

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// TestServiceConfigReembedNext: the config of a runtime names its embedder
// and no reembed block; WithReembedNext adds the next embedder and leaves
// the current one, and both render (validated) as the service reads them.
func TestServiceConfigReembedNext(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "ns"}}
	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-a", Dimensions: 384, Endpoint: "http://a/v1"}
	next := rt.DeepCopy()
	next.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-b", Dimensions: 768, Endpoint: "http://b/v1"}

	plain := ServiceConfig(rt, "engram_bot", memory.DefaultPolicy(), "", 0)
	b, err := MarshalServiceConfig(plain)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Reembed != nil || strings.Contains(string(b), "reembed") {
		t.Errorf("a config without a re-embed has a reembed block:\n%s", b)
	}

	dual := WithReembedNext(plain, EmbeddingConfig(next))
	b, err = MarshalServiceConfig(dual)
	if err != nil {
		t.Fatal(err)
	}
	want := memory.EmbeddingConfig{Provider: "openai", Model: "model-b", Dimensions: 768, Endpoint: "http://b/v1"}
	if dual.Reembed == nil || dual.Reembed.Next != want {
		t.Errorf("reembed = %+v, want next %+v", dual.Reembed, want)
	}
	if dual.Embedding != plain.Embedding || plain.Reembed != nil {
		t.Errorf("WithReembedNext changed the current embedder (%+v) or its argument (%+v)", dual.Embedding, plain.Reembed)
	}
	for _, s := range []string{"reembed:", "next:", "model: model-b", "dimensions: 768", "endpoint: http://b/v1", "model: model-a"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("the rendered config lacks %q:\n%s", s, b)
		}
	}
	if env := ReembedKeyEnv(&memoryv1alpha1.SecretKeySelector{Name: "key-b"}); len(env) != 1 || env[0].Name != naming.EnvReembedEmbeddingAPIKey ||
		env[0].ValueFrom.SecretKeyRef.Name != "key-b" || env[0].ValueFrom.SecretKeyRef.Key != memoryv1alpha1.DefaultAPIKeyKey {
		t.Errorf("ReembedKeyEnv = %+v", env)
	}
	if env := ReembedKeyEnv(nil); env != nil {
		t.Errorf("ReembedKeyEnv(nil) = %+v, want none", env)
	}
}

// TestCronJobReembedKey: a maintenance run gets the next embedder's key
// while a re-embed fills, not before nor after.
func TestCronJobReembedKey(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "ns"}}
	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-b", Dimensions: 384, Endpoint: "http://b/v1",
		APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "key-b"}}
	// Recorded: model-a, whose key is key-a (the current embedder's key
	// goes to runs while a re-embed fills; review 13b).
	rt.Status.Embedding = &memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-a", Dimensions: 384}
	rt.Status.EmbeddingAccess = &memoryv1alpha1.EmbedderAccess{RuntimeEmbedder: *rt.Status.Embedding, Endpoint: "http://a/v1",
		APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "key-a"}}
	rj := &memoryv1alpha1.RetentionJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"}}
	rj.Spec.Schedule = "0 3 * * *"
	for _, tc := range []struct {
		phase string
		want  bool
	}{{"", false}, {memoryv1alpha1.ReembedFilling, true}, {memoryv1alpha1.ReembedPaused, true}, {memoryv1alpha1.ReembedSwitched, false}, {memoryv1alpha1.ReembedAborted, false}} {
		rt.Status.Reembed = nil
		if tc.phase != "" {
			rt.Status.Reembed = &memoryv1alpha1.ReembedStatus{Phase: tc.phase}
		}
		var got, current string
		for _, env := range CronJob(rj, rt, "img").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env {
			switch env.Name {
			case naming.EnvReembedEmbeddingAPIKey:
				got = env.ValueFrom.SecretKeyRef.Name
			case naming.EnvEmbeddingAPIKey:
				current = env.ValueFrom.SecretKeyRef.Name
			}
		}
		if (got == "key-b") != tc.want || (got != "" && got != "key-b") {
			t.Errorf("phase %q: %s from %q, want it: %v", tc.phase, naming.EnvReembedEmbeddingAPIKey, got, tc.want)
		}
		if wantCurrent := map[bool]string{true: "key-a", false: "key-b"}[tc.want]; current != wantCurrent {
			t.Errorf("phase %q: %s from %q, want %q", tc.phase, naming.EnvEmbeddingAPIKey, current, wantCurrent)
		}
	}
}
