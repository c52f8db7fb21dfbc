package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/jobrun"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// scenarioDimensionsChange: spec.embedding.dimensions changes like a model
// (issue 29). On a tenant without a vector, 384 → 512 re-types the four
// vector columns at once (a re-embed of no row, switched in the pass, no
// Job): status.embedding, the config and the columns say 512, and the
// covering index of memories is there with the new size. With a vector,
// 512 → 768 re-embeds: during it, status.embedding, the service's config
// and provisioning keep 512 (DatabaseReady stays True, no
// DimensionsMismatch), the Job fills with 768; after the switch the
// columns are vector(768), the memory's vector has 768 dimensions and the
// config names 768.
func scenarioDimensionsChange(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "dims")
	rt := e.readyRuntime(t, newRuntime(ns, "bot", ""))
	schema := rt.Status.Schema
	setDims := func(d int32) {
		update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
			r.Spec.Embedding.Dimensions = d
		})
	}
	builtin := func(d int32) memoryv1alpha1.RuntimeEmbedder {
		return memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingBuiltin, Dimensions: d}
	}
	configDims := func() int { return e.serviceConfig(t, ns, "bot").Embedding.Dimensions }

	// An empty tenant: the columns take the new size in one pass.
	setDims(512)
	e.markAvailable(t, ns, "bot")
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if got.Status.Embedding == nil || *got.Status.Embedding != builtin(512) {
		t.Fatalf("after 384 → 512 on an empty tenant status.embedding = %+v, want %+v", got.Status.Embedding, builtin(512))
	}
	if re := got.Status.Reembed; re == nil || re.Phase != memoryv1alpha1.ReembedSwitched || re.From != builtin(384) || re.To != builtin(512) ||
		re.Filled != 0 || re.Runs != 1 {
		t.Errorf("status.reembed after the change on an empty tenant = %+v, want Switched 384 → 512, nothing filled", re)
	}
	if err := e.get(t, ns, naming.ReembedJobName("bot", 1), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("a re-embed Job for an empty tenant: %v; want none", err)
	}
	e.checkVectorColumns(t, schema, 512)
	var covering string
	if err := e.pool.QueryRow(testContext(t), `SELECT pg_get_indexdef(to_regclass($1))`,
		pgx.Identifier{schema, "memories_active_vectors_idx"}.Sanitize()).Scan(&covering); err != nil || covering == "" {
		t.Errorf("the covering index of a 512-dimension tenant: %q, %v", covering, err)
	}
	if d := configDims(); d != 512 {
		t.Errorf("the service config names %d dimensions, want 512", d)
	}
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonReembedSwitched, "512")
	// Provisioning now checks 512 against the columns: still ready.
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, "")

	// One memory: 512 → 768 re-embeds it.
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if _, err := e.pool.Exec(testContext(t), `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', 'likes tea', array_fill(0.1::real, ARRAY[512])::vector)`); err != nil {
		t.Fatal(err)
	}
	setDims(768)
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	checkReembedding(t, got, builtin(512), builtin(768), 2)
	if c := got.GetCondition(memoryv1alpha1.ConditionDatabaseReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("DatabaseReady during the re-embed: %+v; provisioning must check the recorded 512, not the spec's 768", c)
	}
	job := e.reembedJob(t, ns, naming.ReembedJobName("bot", 2))
	if cmd := job.Spec.Template.Spec.Containers[0].Command; !slices.Contains(cmd, "--reembed-dimensions=768") {
		t.Errorf("the re-embed Job runs %q", cmd)
	}
	if d := configDims(); d != 512 {
		t.Errorf("the service config names %d dimensions during the re-embed, want 512", d)
	}
	e.checkVectorColumns(t, schema, 512)

	if filled, done := e.runBuiltinFill(t, ns, schema, 768, 30*time.Second); filled != 1 || !done {
		t.Errorf("the run filled %d rows, ended by the switch: %v; want 1 and true", filled, done)
	}
	e.markAvailable(t, ns, "bot")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if *got.Status.Embedding != builtin(768) {
		t.Errorf("after the switch status.embedding = %+v, want %+v", got.Status.Embedding, builtin(768))
	}
	if re := got.Status.Reembed; re == nil || re.Phase != memoryv1alpha1.ReembedSwitched || re.Filled != 1 {
		t.Errorf("after the switch status.reembed = %+v", re)
	}
	e.checkVectorColumns(t, schema, 768)
	var dims int
	if err := e.pool.QueryRow(testContext(t), `SELECT vector_dims(embedding) FROM `+memories+` WHERE content = 'likes tea'`).Scan(&dims); err != nil || dims != 768 {
		t.Errorf("the memory's vector after the switch: %d dimensions (%v), want 768", dims, err)
	}
	if d := configDims(); d != 768 {
		t.Errorf("after the switch the service config names %d dimensions, want 768", d)
	}
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, "")
}

// checkVectorColumns fails unless the embedding column of each of the
// tenant's four vector tables is vector(dims).
func (e *operatorEnv) checkVectorColumns(t *testing.T, schema string, dims int) {
	t.Helper()
	want := fmt.Sprintf("vector(%d)", dims)
	for _, table := range []string{"memories", "messages", "summaries", "episodes"} {
		var typ string
		if err := e.pool.QueryRow(testContext(t), `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = to_regclass($1) AND attname = 'embedding' AND NOT attisdropped`,
			pgx.Identifier{schema, table}.Sanitize()).Scan(&typ); err != nil || typ != want {
			t.Errorf("%s.%s.embedding is %q (%v), want %s", schema, table, typ, err, want)
		}
	}
}

// runBuiltinFill runs the re-embed Job's loop toward the builtin embedder
// of dims as runtime bot's pod would, until the switch or maxRun.
func (e *operatorEnv) runBuiltinFill(t *testing.T, ns, schema string, dims int, maxRun time.Duration) (int64, bool) {
	t.Helper()
	uri, _ := e.tenantLogin(t, ns, "bot")
	pool, err := memory.NewPool(testContext(t), uri, 2, memory.SessionSettings{LockTimeout: 5 * time.Second, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	emb, err := memory.NewBuiltinEmbedder(dims)
	if err != nil {
		t.Fatal(err)
	}
	id := memory.ReembedNamed(string(memoryv1alpha1.EmbeddingBuiltin), "", dims)
	loop := jobrun.ReembedLoop{Filler: memory.NewReembedFiller(pool, memory.ReembedTarget{Schema: schema}, id, emb), Batch: 64,
		MaxRun: maxRun, UnreachableAfter: time.Minute, Idle: 100 * time.Millisecond}
	sum, code := jobrun.ReembedRun(testContext(t), loop, schema, id.String())
	if code != 0 || sum.Result != memory.RunSucceeded {
		t.Fatalf("the re-embed run: exit %d, %+v", code, sum)
	}
	return sum.Operations[0].Affected, sum.Message == ""
}
