package controller

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// scenarioReembedLostDimsSwitch (review 13, H1): a 384 → 768 re-embed
// whose switch committed while its status write was lost, and the next
// pass provisions (here a requested rotation; an operator restart or the
// periodic grant check do the same) before it reads the re-embed row. The
// columns are 768 while status.embedding still says 384: provisioning used
// to refuse them (DimensionsMismatch) and stop the pass before the re-embed
// check, so the switch was never recorded and the service kept sending
// 384-dimension vectors to 768-dimension columns. Provisioning accepts the
// size the active re-embed switches to; the pass goes on, records the
// switch, and renders the 768 config.
func scenarioReembedLostDimsSwitch(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "lostdims")
	rt := e.readyRuntime(t, newRuntime(ns, "bot", ""))
	schema := rt.Status.Schema
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if _, err := e.pool.Exec(testContext(t), `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', 'likes tea', array_fill(0.1::real, ARRAY[384])::vector)`); err != nil {
		t.Fatal(err)
	}
	set := func(f func(r *memoryv1alpha1.MemoryRuntime)) {
		update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, f)
	}
	set(func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Embedding.Dimensions = 768 })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	// The operator "crashes" between the switch and its status write: paused,
	// it does not act while the test fills and switches in its place.
	set(func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Paused = true })
	time.Sleep(2 * time.Second)
	if _, err := e.pool.Exec(testContext(t), `UPDATE `+memories+` SET embedding_next = array_fill(0.2::real, ARRAY[768])::vector`); err != nil {
		t.Fatal(err)
	}
	tg := memory.ReembedTarget{Schema: schema, Owner: tenant.OwnerRole(schema), Login: tenant.LoginRole(schema)}
	if err := memory.ReembedSwitch(testContext(t), e.pool, tg); err != nil {
		t.Fatal(err)
	}
	set(func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Paused = false
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRotateCredentials, "after-switch")
	})
	got := e.waitReady(t, ns, "bot")
	if got.Status.Embedding == nil || got.Status.Embedding.Dimensions != 768 {
		t.Fatalf("status.embedding = %+v after the lost switch, want 768 dimensions", got.Status.Embedding)
	}
	if got.Status.Reembed == nil || got.Status.Reembed.Phase != memoryv1alpha1.ReembedSwitched {
		t.Fatalf("status.reembed = %+v, want phase Switched", got.Status.Reembed)
	}
	if d := e.serviceConfig(t, ns, "bot").Embedding.Dimensions; d != 768 {
		t.Fatalf("the service's config has %d dimensions after the switch, want 768 (DB: %s)", d, reembedDBState(e, t, schema))
	}
}
