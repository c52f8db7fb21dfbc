package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/jobrun"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// scenarioEmbeddingChange: status.embedding records the embedder of the
// tenant's vectors. A provider or model change on a tenant without a
// vector is accepted at once; once the tenant holds one, a change starts a
// re-embed: Ready False (Reembedding, not Stalled), status.reembed, a Job
// owned by the runtime running `manager job --ops=reembed` with the new
// model, the service's config unchanged. A failed Job pauses it
// (EmbedderUnreachable); setting spec.embedding back aborts it (Job
// deleted, Ready again). Run to the end (the test runs the Job's fill loop
// itself: envtest has no kubelet; a row written after a Job's run makes
// the operator start another Job first), the operator switches: status.embedding
// and the config name the new model, and the stored vector is the new
// model's.
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
	modelB := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-b", Dimensions: 384}
	if got.Status.Embedding == nil || *got.Status.Embedding != modelA {
		t.Fatalf("after a change on an empty tenant status.embedding = %+v, want %+v", got.Status.Embedding, modelA)
	}
	if m := configModel(); m != "model-a" {
		t.Fatalf("the service config names model %q, want model-a", m)
	}
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonEmbeddingChanged, "model-a")
	schema := got.Status.Schema

	// One memory: another model starts a re-embed, Job 1.
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if _, err := e.pool.Exec(testContext(t), `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', 'likes tea', array_fill(0.1::real, ARRAY[384])::vector)`); err != nil {
		t.Fatal(err)
	}
	setModel("model-b")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	t.Logf("model-a → model-b with a memory: %s", got.GetCondition(memoryv1alpha1.ConditionReady).Message)
	checkReembedding(t, got, modelA, modelB, 1)
	job1 := e.reembedJob(t, ns, naming.ReembedJobName("bot", 1))
	if cmd := job1.Spec.Template.Spec.Containers[0].Command; !slices.Contains(cmd, "--ops=reembed") || !slices.Contains(cmd, "--reembed-model=model-b") {
		t.Errorf("the re-embed Job runs %q", cmd)
	}
	if m := configModel(); m != "model-a" {
		t.Errorf("the service config names model %q during the re-embed, want model-a", m)
	}
	e.waitReembedNext(t, ns, "bot", "model-b") // dual writes toward model-b
	// A third model while it runs: refused by the API server (the CRD's
	// rule reads status.reembed), the message saying how to cancel.
	if err := e.dryRunUpdate(t, ns, "bot", func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Embedding.Model = "model-c" }); err == nil ||
		!strings.Contains(err.Error(), `set spec.embedding back to provider openai, model model-a to cancel it`) {
		t.Errorf("a third model during the re-embed: %v; want refused with how to cancel", err)
	}

	// The embedder unreachable: the Job fails by its pod failure policy.
	e.finishJob(t, &job1, false)
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonEmbedderUnreachable)
	if re := got.Status.Reembed; re.Phase != memoryv1alpha1.ReembedPaused || re.Left != 1 {
		t.Errorf("status.reembed after a failed Job = %+v, want Paused with 1 row left", re)
	}

	// Set back: aborted, the Job gone, Ready again.
	setModel("model-a")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if re := got.Status.Reembed; re == nil || re.Phase != memoryv1alpha1.ReembedAborted || *got.Status.Embedding != modelA {
		t.Errorf("after the rollback status.reembed = %+v, status.embedding = %+v", re, got.Status.Embedding)
	}
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonReembedAborted, "model-b")
	e.waitReembedNext(t, ns, "bot", "") // no dual writes after the abort
	eventually(t, "the aborted re-embed's Job is deleted", 20*time.Second, func() error {
		err := e.get(t, ns, job1.Name, &batchv1.Job{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("Job %s: %v", job1.Name, err)
	})
	var shadow int
	if err := e.pool.QueryRow(testContext(t), `SELECT count(*) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'embedding_next' AND NOT attisdropped`,
		memories).Scan(&shadow); err != nil || shadow != 0 {
		t.Errorf("shadow columns after the abort: %d (%v)", shadow, err)
	}

	// Again, to the end: Job 2 (numbers count on). It ends at its time
	// bound without filling anything (a write came meanwhile: 2 rows
	// left): a completed Job with rows left is followed by Job 3.
	setModel("model-b")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	checkReembedding(t, got, modelA, modelB, 2)
	job2 := e.reembedJob(t, ns, naming.ReembedJobName("bot", 2))
	if _, err := e.pool.Exec(testContext(t), `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', 'likes green tea', array_fill(0.1::real, ARRAY[384])::vector)`); err != nil {
		t.Fatal(err)
	}
	e.finishJob(t, &job2, true)
	eventually(t, "a finished Job with rows left starts the next one", 20*time.Second, func() error {
		var rt memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, "bot", &rt); err != nil {
			return err
		}
		if re := rt.Status.Reembed; re == nil || re.Runs != 3 || re.Left != 2 || re.Phase != memoryv1alpha1.ReembedFilling {
			return fmt.Errorf("status.reembed = %+v, want run 3 with 2 rows left", re)
		}
		return nil
	})
	// Job 3 fills both rows and keeps looking for more; the operator reads
	// no row left while it runs and switches (and deletes the Job), which
	// ends the run: nobody completes Job 3.
	e.reembedJob(t, ns, naming.ReembedJobName("bot", 3))
	if filled, done := e.runReembedFillUntil(t, ns, schema, "model-b", 30*time.Second); filled != 2 || !done {
		t.Errorf("Job 3's run filled %d rows, ended by the switch: %v; want 2 and true", filled, done)
	}
	e.markAvailable(t, ns, "bot")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if *got.Status.Embedding != modelB {
		t.Errorf("after the switch status.embedding = %+v, want %+v", got.Status.Embedding, modelB)
	}
	if re := got.Status.Reembed; re == nil || re.Phase != memoryv1alpha1.ReembedSwitched || re.Filled != 2 || re.Left != 0 {
		t.Errorf("after the switch status.reembed = %+v", re)
	}
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonReembedSwitched, "model-b")
	if m := configModel(); m != "model-b" {
		t.Errorf("after the switch the service config names model %q, want model-b", m)
	}
	e.waitReembedNext(t, ns, "bot", "") // no dual writes after the switch
	var isNew bool
	if err := e.pool.QueryRow(testContext(t), `SELECT bool_and(embedding <> array_fill(0.1::real, ARRAY[384])::vector) FROM `+memories).Scan(&isNew); err != nil || !isNew {
		t.Errorf("a memory's vector after the switch is the old one (%v)", err)
	}
}

func checkReembedding(t *testing.T, got *memoryv1alpha1.MemoryRuntime, from, to memoryv1alpha1.RuntimeEmbedder, run int32) {
	t.Helper()
	if s := got.GetCondition(memoryv1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
		t.Errorf("Stalled during a re-embed: %+v", s)
	}
	if *got.Status.Embedding != from {
		t.Errorf("status.embedding during the re-embed = %+v, want %+v", got.Status.Embedding, from)
	}
	re := got.Status.Reembed
	if re == nil || re.From != from || re.To != to || re.Phase != memoryv1alpha1.ReembedFilling || re.Runs != run || re.Left != 1 || re.StartedAt == nil {
		t.Errorf("status.reembed = %+v, want Filling %v → %v, run %d, 1 row left", re, from, to, run)
	}
}

func (e *operatorEnv) reembedJob(t *testing.T, ns, name string) batchv1.Job {
	t.Helper()
	var job batchv1.Job
	eventually(t, "the re-embed Job "+name, 20*time.Second, func() error { return e.get(t, ns, name, &job) })
	return job
}

// finishJob sets what the Job controller would: Complete, or Failed by
// the pod failure policy (the embedder unreachable).
func (e *operatorEnv) finishJob(t *testing.T, job *batchv1.Job, ok bool) {
	t.Helper()
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, Succeeded: 1, CompletionTime: &now, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}}
	if !ok {
		job.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: batchv1.JobReasonPodFailurePolicy, Message: "exit code 3"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: batchv1.JobReasonPodFailurePolicy, Message: "exit code 3"},
		}}
	}
	if err := e.c.Status().Update(testContext(t), job); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err) // NotFound: the operator switched while the run was up and deleted the Job
	}
}

// runReembedFill runs the re-embed Job's loop as its pod would: the
// tenant's login role, the new model (the builtin embedder under its name).
func (e *operatorEnv) runReembedFill(t *testing.T, ns, schema, model string) int64 {
	t.Helper()
	filled, _ := e.runReembedFillUntil(t, ns, schema, model, 2*time.Second)
	return filled
}

// runReembedFillUntil: the run fills, then keeps looking for rows until
// the re-embed is switched or aborted (done) or maxRun passes.
func (e *operatorEnv) runReembedFillUntil(t *testing.T, ns, schema, model string, maxRun time.Duration) (int64, bool) {
	t.Helper()
	uri, _ := e.tenantLogin(t, ns, "bot")
	pool, err := memory.NewPool(testContext(t), uri, 2, memory.SessionSettings{LockTimeout: 5 * time.Second, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	emb, err := memory.NewBuiltinEmbedder(384)
	if err != nil {
		t.Fatal(err)
	}
	id := memory.ReembedNamed("openai", model, 384)
	loop := jobrun.ReembedLoop{Filler: memory.NewReembedFiller(pool, memory.ReembedTarget{Schema: schema}, id, emb), Batch: 64,
		MaxRun: maxRun, UnreachableAfter: time.Minute, Idle: 100 * time.Millisecond}
	sum, code := jobrun.ReembedRun(testContext(t), loop, schema, id.String())
	if code != 0 || sum.Result != memory.RunSucceeded {
		t.Fatalf("the re-embed run: exit %d, %+v", code, sum)
	}
	return sum.Operations[0].Affected, sum.Message == ""
}
