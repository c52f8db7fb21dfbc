package controller

// Re-embeds whose status write was lost, and a second re-embed on one
// tenant (the hostile review of the wiring: status must never name an
// embedder whose vectors the column does not hold).

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// reembedSetup: a Ready runtime of model-a holding one vector.
func reembedSetup(e *operatorEnv, t *testing.T, prefix string) (ns, schema string, setModel func(string, *bool)) {
	ns = e.newNamespace(t, prefix)
	e.readyRuntime(t, newRuntime(ns, "bot", ""))
	setModel = func(model string, paused *bool) {
		update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
			r.Spec.Embedding.Provider = memoryv1alpha1.EmbeddingOpenAI
			r.Spec.Embedding.Endpoint = "http://127.0.0.1:9/v1"
			r.Spec.Embedding.Model = model
			if paused != nil {
				r.Spec.Paused = *paused
			}
		})
	}
	setModel("model-a", nil)
	e.markAvailable(t, ns, "bot")
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	schema = got.Status.Schema
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if _, err := e.pool.Exec(testContext(t), `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', 'likes tea', array_fill(0.1::real, ARRAY[384])::vector)`); err != nil {
		t.Fatal(err)
	}
	return ns, schema, setModel
}

// reembedDBState: the tenant's reembed row, as the operator reads it.
func reembedDBState(e *operatorEnv, t *testing.T, schema string) string {
	p, err := memory.ReadReembedProgress(testContext(t), e.pool, memory.ReembedTarget{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("current=%s phase=%s", p.Current, p.Phase)
}

// The switch committed but its status write was lost (operator crash), and
// spec.embedding was set back before the next reconcile.
func scenarioReembedLostSwitchThenRollback(e *operatorEnv, t *testing.T) {
	ns, schema, setModel := reembedSetup(e, t, "reembed-lost-switch")
	setModel("model-b", nil)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	yes, no := true, false
	setModel("model-b", &yes) // freeze the operator: stands for "crashed after Switch"
	time.Sleep(2 * time.Second)
	// Filled while frozen: the operator would switch itself on reading no row left.
	e.runReembedFill(t, ns, schema, "model-b")
	tg := memory.ReembedTarget{Schema: schema, Owner: tenant.OwnerRole(schema), Login: tenant.LoginRole(schema)}
	if err := memory.ReembedSwitch(testContext(t), e.pool, tg); err != nil {
		t.Fatal(err)
	}
	t.Logf("DB after the (operator's) switch: %s", reembedDBState(e, t, schema))
	setModel("model-a", &no) // the user cancels; the operator comes back
	// The column holds model-b's vectors: status records that first, and
	// the spec's model-a is then a re-embed back, with the service on b.
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	if got.Status.Embedding.Model != "model-b" {
		t.Errorf("status.embedding names %q but the column holds model-b's vectors (DB: %s)", got.Status.Embedding.Model, reembedDBState(e, t, schema))
	}
	if re := got.Status.Reembed; re == nil || re.From.Model != "model-b" || re.To.Model != "model-a" {
		t.Errorf("status.reembed = %+v; want a re-embed from model-b back to model-a", re)
	}
	// Not asserted: the service's config. No endpoint is recorded for
	// model-b (status.embeddingAccess is recorded only while the spec names
	// the recorded embedder, never read back from the live objects), so the
	// operator stops the rollout while the re-embed back runs: the config
	// still names model-a, the guard refuses its vector writes (503) and its
	// searches compare model-a queries with model-b vectors until the
	// re-embed back switches (docs/operations.md, "A switch whose status
	// write was lost").
}

// A second re-embed (model-a → model-b → model-c) on the same tenant.
func scenarioReembedTwice(e *operatorEnv, t *testing.T) {
	ns, schema, setModel := reembedSetup(e, t, "reembed-twice")
	setModel("model-b", nil)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	job := e.reembedJob(t, ns, naming.ReembedJobName("bot", got.Status.Reembed.Runs))
	e.runReembedFill(t, ns, schema, "model-b")
	e.finishJob(t, &job, true)
	e.markAvailable(t, ns, "bot")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	t.Logf("first switch done: status.embedding=%s DB: %s", got.Status.Embedding.Model, reembedDBState(e, t, schema))

	setModel("model-c", nil)
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	job = e.reembedJob(t, ns, naming.ReembedJobName("bot", got.Status.Reembed.Runs))
	e.runReembedFill(t, ns, schema, "model-c")
	e.finishJob(t, &job, true)
	e.markAvailable(t, ns, "bot")
	deadline := time.Now().Add(40 * time.Second)
	var rt memoryv1alpha1.MemoryRuntime
	for time.Now().Before(deadline) {
		if err := e.get(t, ns, "bot", &rt); err != nil {
			t.Fatal(err)
		}
		if rt.Status.Embedding.Model == "model-c" {
			t.Logf("second switch done")
			return
		}
		time.Sleep(2 * time.Second)
	}
	c := rt.GetCondition(memoryv1alpha1.ConditionReady)
	t.Errorf("40 s after the model-c Job completed: status.embedding=%s, reembed=%+v, Ready=%s %s: %s; DB: %s",
		rt.Status.Embedding.Model, *rt.Status.Reembed, c.Status, c.Reason, c.Message, reembedDBState(e, t, schema))
}

// A reconcile that turned A→B into A→C (abort, begin, Job 2) lost its
// status write; spec.embedding is then set back to B.
func scenarioReembedLostRetargetThenBack(e *operatorEnv, t *testing.T) {
	ns, schema, setModel := reembedSetup(e, t, "reembed-retarget")
	setModel("model-b", nil)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	job1 := e.reembedJob(t, ns, naming.ReembedJobName("bot", 1))
	yes, no := true, false
	setModel("model-b", &yes) // operator frozen: stands for the lost reconcile
	time.Sleep(2 * time.Second)
	// What the lost reconcile did (spec was model-c): Abort, Begin A→C, Job 1 deleted, Job 2 (C) created.
	tg := memory.ReembedTarget{Schema: schema, Owner: tenant.OwnerRole(schema), Login: tenant.LoginRole(schema)}
	if err := memory.ReembedAbort(testContext(t), e.pool, tg); err != nil {
		t.Fatal(err)
	}
	modelA := memory.ReembedNamed("openai", "model-a", 384)
	modelC := memory.ReembedNamed("openai", "model-c", 384)
	if err := memory.ReembedBegin(testContext(t), e.pool, tg, modelA, modelC); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(testContext(t), &job1); err != nil {
		t.Fatal(err)
	}
	var rt memoryv1alpha1.MemoryRuntime
	if err := e.get(t, ns, "bot", &rt); err != nil {
		t.Fatal(err)
	}
	toC := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-c", Dimensions: 384}
	job2 := specs.ReembedJob(&rt, "img:1", toC, 2)
	if err := e.c.Create(testContext(t), job2); err != nil {
		t.Fatal(err)
	}
	// Job 2 (C) runs to the end.
	e.runReembedFill(t, ns, schema, "model-c")
	j2 := e.reembedJob(t, ns, job2.Name)
	e.finishJob(t, &j2, true)
	t.Logf("DB now: %s; status.reembed=%+v", reembedDBState(e, t, schema), *got.Status.Reembed)

	setModel("model-b", &no) // back to B; operator resumes
	// The operator recreates Job 1 (B); its filler would refuse (ErrWrongEmbedder, exit 1): it fails, a while ago.
	var job1b batchv1.Job
	eventually(t, "job 1 recreated", 30*time.Second, func() error { return e.get(t, ns, naming.ReembedJobName("bot", 1), &job1b) })
	t.Logf("Job 1 recreated, command %v", job1b.Spec.Template.Spec.Containers[0].Command)
	past := metav1.NewTime(time.Now().Add(-2 * time.Minute))
	job1b.Status = batchv1.JobStatus{StartTime: &past, Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: past, Reason: "BackoffLimitExceeded"},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: past, Reason: "BackoffLimitExceeded"}}}
	if err := e.c.Status().Update(testContext(t), &job1b); err != nil {
		t.Fatal(err)
	}
	e.markAvailable(t, ns, "bot")
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		if err := e.get(t, ns, "bot", &rt); err != nil {
			t.Fatal(err)
		}
		if rt.Status.Reembed != nil && rt.Status.Reembed.Phase == memoryv1alpha1.ReembedSwitched {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("status.embedding=%s status.reembed=%+v config model=%q; DB: %s", rt.Status.Embedding.Model, *rt.Status.Reembed,
		e.serviceConfig(t, ns, "bot").Embedding.Model, reembedDBState(e, t, schema))
	if rt.Status.Embedding.Model == "model-b" && reembedDBState(e, t, schema) != "current=openai/model-b (384 dimensions) phase=idle" {
		t.Errorf("status.embedding names model-b but the column holds %s", reembedDBState(e, t, schema))
	}
}

// The reconcile that began a re-embed (A→B) lost its status write after
// Begin, and spec.embedding is set back to A (hostile review M1). The
// intent was recorded in status before Begin (its own status write), so
// the operator knows of the re-embed and aborts it: no shadow column is
// left filling forever.
func scenarioReembedLostBeginThenBack(e *operatorEnv, t *testing.T) {
	ns, schema, setModel := reembedSetup(e, t, "reembed-lost-begin")
	yes, no := true, false
	setModel("model-a", &yes) // operator frozen: stands for the reconcile that lost its write
	time.Sleep(2 * time.Second)
	// What that reconcile did (spec was model-b): the intent, then Begin.
	var rt memoryv1alpha1.MemoryRuntime
	if err := e.get(t, ns, "bot", &rt); err != nil {
		t.Fatal(err)
	}
	if rt.Status.Reembed != nil {
		t.Fatalf("status.reembed before the change: %+v", rt.Status.Reembed)
	}
	now := metav1.Now()
	fromA := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-a", Dimensions: 384}
	toB := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-b", Dimensions: 384}
	rt.Status.Reembed = &memoryv1alpha1.ReembedStatus{From: fromA, To: toB, Phase: memoryv1alpha1.ReembedFilling, StartedAt: &now, Runs: 1}
	if err := e.c.Status().Update(testContext(t), &rt); err != nil {
		t.Fatal(err)
	}
	tg := memory.ReembedTarget{Schema: schema, Owner: tenant.OwnerRole(schema), Login: tenant.LoginRole(schema)}
	if err := memory.ReembedBegin(testContext(t), e.pool, tg, memory.ReembedNamed("openai", "model-a", 384), memory.ReembedNamed("openai", "model-b", 384)); err != nil {
		t.Fatal(err)
	}
	setModel("model-a", &no) // spec back at A (it never left A here); the operator resumes
	e.markAvailable(t, ns, "bot")
	eventually(t, "the re-embed begun without its status write is aborted", 40*time.Second, func() error {
		if err := e.get(t, ns, "bot", &rt); err != nil {
			return err
		}
		if re := rt.Status.Reembed; re == nil || re.Phase != memoryv1alpha1.ReembedAborted {
			return fmt.Errorf("status.reembed = %+v", re)
		}
		if st := reembedDBState(e, t, schema); st != "current=openai/model-a (384 dimensions) phase=idle" {
			return fmt.Errorf("DB: %s", st)
		}
		return nil
	})
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if rt.Status.Embedding.Model != "model-a" {
		t.Errorf("status.embedding = %+v, want model-a", rt.Status.Embedding)
	}
}
