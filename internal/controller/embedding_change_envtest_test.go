package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// scenarioEmbeddingChange: status.embedding records the embedder of the
// tenant's vectors. A provider or model change on a tenant without a
// vector is accepted (the config names the new model); once the tenant
// holds one, another model is refused (Ready False,
// EmbeddingChangeNeedsReembed, Stalled, a Warning event) and the service's
// config keeps the recorded model; setting it back makes the runtime Ready.
func scenarioEmbeddingChange(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "embed")
	rt := e.readyRuntime(t, newRuntime(ns, "bot", ""))
	builtin := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingBuiltin, Dimensions: 384}
	if rt.Status.Embedding == nil || *rt.Status.Embedding != builtin {
		t.Fatalf("status.embedding = %+v, want %+v", rt.Status.Embedding, builtin)
	}
	setModel := func(model string) {
		update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
			r.Spec.Embedding.Provider = memoryv1alpha1.EmbeddingOpenAI
			r.Spec.Embedding.Endpoint = "http://127.0.0.1:9/v1" // never called: envtest runs no pod
			r.Spec.Embedding.Model = model
		})
	}
	configModel := func() string { return e.serviceConfig(t, ns, "bot").Embedding.Model }

	// An empty tenant: the change is accepted.
	setModel("model-a")
	e.markAvailable(t, ns, "bot")
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	modelA := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-a", Dimensions: 384}
	if got.Status.Embedding == nil || *got.Status.Embedding != modelA {
		t.Fatalf("after a change on an empty tenant status.embedding = %+v, want %+v", got.Status.Embedding, modelA)
	}
	if m := configModel(); m != "model-a" {
		t.Fatalf("the service config names model %q, want model-a", m)
	}
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonEmbeddingChanged, "model-a")

	// One memory: another model is refused.
	insert := fmt.Sprintf(`INSERT INTO %s (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', 'likes tea', array_fill(0.1::real, ARRAY[384])::vector)`,
		pgx.Identifier{got.Status.Schema, "memories"}.Sanitize())
	if _, err := e.pool.Exec(testContext(t), insert); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	setModel("model-b")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonEmbeddingChangeNeedsReembed)
	msg := got.GetCondition(memoryv1alpha1.ConditionReady).Message
	t.Logf("model-a → model-b with a memory: %s", msg)
	if err := containsAll(msg, `"model-a"`, `"model-b"`, "docs/export.md"); err != nil {
		t.Error(err)
	}
	if s := got.GetCondition(memoryv1alpha1.ConditionStalled); s == nil || s.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v, want True", s)
	}
	if *got.Status.Embedding != modelA {
		t.Errorf("status.embedding = %+v, want %+v", got.Status.Embedding, modelA)
	}
	e.waitEventSince(t, ns, "bot", memoryv1alpha1.ReasonEmbeddingChangeNeedsReembed, "model-b", since)
	if m := configModel(); m != "model-a" {
		t.Errorf("the refused change reached the service config: model %q, want model-a", m)
	}

	// Set back: Ready again, nothing left of the refusal.
	setModel("model-a")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if s := got.GetCondition(memoryv1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
		t.Errorf("Stalled still True: %+v", s)
	}
}
