package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// scenarioReembedDualWriteKeys: a re-embed between two OpenAI-compatible
// embedders of different endpoints and key Secrets. While it fills, the
// service's config names the recorded embedder (its endpoint, from
// status.embeddingAccess, recorded while the spec named it) with reembed.next = the spec's, and
// the Deployment reads the recorded embedder's key from its Secret and
// the next one's from the spec's; one rollout at the begin. Set back: the
// config and the env lose the next embedder (a rollout back).
func scenarioReembedDualWriteKeys(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "dualkeys")
	for _, name := range []string{"key-a", "key-b"} {
		mustCreate(t, e.c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{"apiKey": "sk-" + name}})
	}
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingOpenAI, Endpoint: "http://127.0.0.1:9/a/v1", Model: "model-a",
		APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "key-a"}}
	got := e.readyRuntime(t, rt)
	memories := pgx.Identifier{got.Status.Schema, "memories"}.Sanitize()
	if _, err := e.pool.Exec(testContext(t), `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', 'likes tea', array_fill(0.1::real, ARRAY[384])::vector)`); err != nil {
		t.Fatal(err)
	}
	hash := e.templateHash(t, ns, "bot")

	update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Embedding.Endpoint = "http://127.0.0.1:9/b/v1"
		r.Spec.Embedding.Model = "model-b"
		r.Spec.Embedding.APIKeySecretRef = &memoryv1alpha1.SecretKeySelector{Name: "key-b", Key: "apiKey"}
	})
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	e.waitReembedNext(t, ns, "bot", "model-b")
	cfg := e.serviceConfig(t, ns, "bot")
	if cfg.Embedding.Model != "model-a" || cfg.Embedding.Endpoint != "http://127.0.0.1:9/a/v1" {
		t.Errorf("the service's embedding during the re-embed = %+v, want model-a at /a/v1", cfg.Embedding)
	}
	if n := cfg.Reembed.Next; n.Provider != "openai" || n.Endpoint != "http://127.0.0.1:9/b/v1" || n.Dimensions != 384 {
		t.Errorf("reembed.next = %+v, want openai model-b at /b/v1, 384 dimensions", n)
	}
	if h := e.templateHash(t, ns, "bot"); h == hash {
		t.Errorf("the pod template hash did not change at the begin: no rollout")
	}
	env := e.serviceEnv(t, ns, "bot")
	if ref := env[naming.EnvEmbeddingAPIKey]; ref != "key-a/apiKey" {
		t.Errorf("%s from %q during the re-embed, want key-a/apiKey (the recorded embedder's)", naming.EnvEmbeddingAPIKey, ref)
	}
	if ref := env[naming.EnvReembedEmbeddingAPIKey]; ref != "key-b/apiKey" {
		t.Errorf("%s from %q during the re-embed, want key-b/apiKey (the spec's)", naming.EnvReembedEmbeddingAPIKey, ref)
	}

	// Review 13b: the current embedder comes from status.embeddingAccess,
	// not from the live objects. An endpoint edited into the ConfigMap and
	// a deleted Deployment come back as the operator recorded them.
	var cm corev1.ConfigMap
	if err := e.get(t, ns, naming.ConfigMapName("bot"), &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[naming.KeyConfig] = strings.ReplaceAll(cm.Data[naming.KeyConfig], "http://127.0.0.1:9/a/v1", "http://evil.example:8080/v1")
	if err := e.c.Update(testContext(t), &cm); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(testContext(t), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.DeploymentName("bot")}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edited endpoint and the deleted Deployment are put back", 30*time.Second, func() error {
		if cfg := e.serviceConfig(t, ns, "bot"); cfg.Embedding.Endpoint != "http://127.0.0.1:9/a/v1" || cfg.Reembed == nil {
			return fmt.Errorf("config embedding = %+v, reembed = %+v", cfg.Embedding, cfg.Reembed)
		}
		var d appsv1.Deployment
		if err := e.get(t, ns, naming.DeploymentName("bot"), &d); err != nil {
			return err
		}
		if env := e.serviceEnv(t, ns, "bot"); env[naming.EnvEmbeddingAPIKey] != "key-a/apiKey" || env[naming.EnvReembedEmbeddingAPIKey] != "key-b/apiKey" {
			return fmt.Errorf("env = %v", env)
		}
		return nil
	})

	// Set back: aborted; the config and the Deployment without the next.
	update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Embedding.Endpoint = "http://127.0.0.1:9/a/v1"
		r.Spec.Embedding.Model = "model-a"
		r.Spec.Embedding.APIKeySecretRef = &memoryv1alpha1.SecretKeySelector{Name: "key-a"}
	})
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	e.waitReembedNext(t, ns, "bot", "")
	env = e.serviceEnv(t, ns, "bot")
	if ref, ok := env[naming.EnvReembedEmbeddingAPIKey]; ok || env[naming.EnvEmbeddingAPIKey] != "key-a/apiKey" {
		t.Errorf("after the abort the env has %s from %q and %s from %q; want none and key-a/apiKey",
			naming.EnvReembedEmbeddingAPIKey, ref, naming.EnvEmbeddingAPIKey, env[naming.EnvEmbeddingAPIKey])
	}
	if h := e.templateHash(t, ns, "bot"); h != hash {
		t.Errorf("the pod template hash after the abort differs from the one before the re-embed: %s vs %s", h, hash)
	}
}

// waitReembedNext waits for the service's config to name model as
// reembed.next's model ("": no reembed block).
func (e *operatorEnv) waitReembedNext(t *testing.T, ns, name, model string) {
	t.Helper()
	eventually(t, fmt.Sprintf("the service's reembed.next is %q", model), 20*time.Second, func() error {
		cfg := e.serviceConfig(t, ns, name)
		switch {
		case model == "" && cfg.Reembed != nil:
			return fmt.Errorf("reembed = %+v, want none", cfg.Reembed)
		case model != "" && (cfg.Reembed == nil || cfg.Reembed.Next.Model != model):
			return fmt.Errorf("reembed = %+v, want next model %q", cfg.Reembed, model)
		}
		return nil
	})
}

// serviceEnv is the service container's Secret-backed env: name → secret/key.
func (e *operatorEnv) serviceEnv(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	var d appsv1.Deployment
	if err := e.get(t, ns, name, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, env := range d.Spec.Template.Spec.Containers[0].Env {
		if env.ValueFrom != nil && env.ValueFrom.SecretKeyRef != nil {
			out[env.Name] = env.ValueFrom.SecretKeyRef.Name + "/" + env.ValueFrom.SecretKeyRef.Key
		}
	}
	return out
}
