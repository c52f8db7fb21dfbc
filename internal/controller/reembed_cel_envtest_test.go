package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// scenarioReembedCEL: while a re-embed runs (status.reembed Filling or
// Paused), the API server refuses a spec.embedding naming a third embedder,
// with a message saying how to cancel; going back to the re-embed's from,
// edits that keep the embedder (endpoint, replicas) and any change once
// the re-embed is Switched or Aborted are accepted. The CRD's root rule
// reads self.status: on an update of the object the API server keeps the
// stored status (status subresource), which the test writes itself. The
// runtime's connection does not exist, so the operator never reaches the
// embedder check and leaves status.reembed alone (it patches only what it
// changes). Updates are server-side dry runs: the spec stays model-b.
func scenarioReembedCEL(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "reembed-cel")
	ctx := testContext(t)
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database:  memoryv1alpha1.DatabaseSpec{ClusterConnection: "nowhere", Schema: "cel_reembed"},
			Embedding: memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingOpenAI, Endpoint: "http://127.0.0.1:9/v1", Model: "model-b"},
		}}
	mustCreate(t, e.c, rt)
	e.waitCondition(t, ns, rt.Name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonConnectionSecretNotFound)

	modelA := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-a", Dimensions: 384}
	modelB := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-b", Dimensions: 384}
	builtin := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingBuiltin, Dimensions: 384}
	// setReembed writes status.reembed through the status subresource (a
	// status write: spec unchanged, so the rule lets it through).
	setReembed := func(from, to memoryv1alpha1.RuntimeEmbedder, phase string) {
		t.Helper()
		eventually(t, "writing status.reembed "+phase, 10*time.Second, func() error {
			var cur memoryv1alpha1.MemoryRuntime
			if err := e.get(t, ns, rt.Name, &cur); err != nil {
				return err
			}
			now := metav1.Now()
			cur.Status.Reembed = &memoryv1alpha1.ReembedStatus{From: from, To: to, Phase: phase, Runs: 1, StartedAt: &now, Left: 1}
			err := e.c.Status().Update(ctx, &cur)
			if err != nil && !apierrors.IsConflict(err) {
				t.Fatalf("the status write was refused: %v", err)
			}
			return err
		})
	}
	openai := func(model string) func(*memoryv1alpha1.MemoryRuntime) {
		return func(r *memoryv1alpha1.MemoryRuntime) {
			r.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingOpenAI, Endpoint: "http://127.0.0.1:9/v1", Model: model}
		}
	}
	toBuiltin := func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{} }
	otherEndpoint := func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Embedding.Endpoint = "http://127.0.0.1:10/v1" }
	replicas := func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.Replicas = ptr.To[int32](3) }
	// try dry-runs an update of the stored runtime: refused with a message
	// containing want, or accepted when want is empty.
	try := func(what string, mutate func(*memoryv1alpha1.MemoryRuntime), want string) {
		t.Helper()
		err := e.dryRunUpdate(t, ns, rt.Name, mutate)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: refused: %v", what, err)
		case want != "" && err == nil:
			t.Errorf("%s: accepted; want refused with %q", what, want)
		case want != "" && !strings.Contains(err.Error(), want):
			t.Errorf("%s: refused with %q\nwant a message containing %q", what, err, want)
		case want != "":
			t.Logf("%s: %v", what, err)
		}
	}

	// No re-embed recorded: any embedder.
	try("no re-embed: model-c", openai("model-c"), "")
	cancelToA := "spec.embedding: Forbidden: spec.embedding cannot change while a re-embed to openai model model-b runs " +
		"(status.reembed.phase Filling): set spec.embedding back to provider openai, model model-a to cancel it, " +
		"or wait until status.reembed.phase is Switched"
	setReembed(modelA, modelB, memoryv1alpha1.ReembedFilling)
	try("Filling: a third model", openai("model-c"), cancelToA)
	// The status sent with the update is not what the rule reads: the
	// API server puts back the stored one.
	try("Filling: a third model, the request's status naming no re-embed", func(r *memoryv1alpha1.MemoryRuntime) {
		openai("model-c")(r)
		r.Status.Reembed = nil
	}, cancelToA)
	try("Filling: builtin", toBuiltin, "set spec.embedding back to provider openai, model model-a to cancel it")
	try("Filling: back to from", openai("model-a"), "")
	try("Filling: another endpoint, same model", otherEndpoint, "")
	try("Filling: replicas", replicas, "")

	setReembed(modelA, modelB, memoryv1alpha1.ReembedPaused)
	try("Paused: a third model", openai("model-c"), "(status.reembed.phase Paused): set spec.embedding back to provider openai, model model-a")
	try("Paused: back to from", openai("model-a"), "")

	// From builtin, compared as the operator does: builtin's model field
	// is ignored, provider left out is builtin.
	setReembed(builtin, modelB, memoryv1alpha1.ReembedFilling)
	try("from builtin: a third model", openai("model-c"), "set spec.embedding back to provider builtin to cancel it")
	try("from builtin: back to builtin, provider left out", toBuiltin, "")
	try("from builtin: back to builtin with a model named", func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingBuiltin, Model: "ignored"}
	}, "")

	for _, phase := range []string{memoryv1alpha1.ReembedSwitched, memoryv1alpha1.ReembedAborted} {
		setReembed(modelA, modelB, phase)
		try(phase+": a third model", openai("model-c"), "")
		try(phase+": builtin", toBuiltin, "")
	}
	if err := e.c.Delete(ctx, rt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runtime is deleted (finalizer removed)", 30*time.Second, func() error {
		if err := e.get(t, ns, rt.Name, &memoryv1alpha1.MemoryRuntime{}); !apierrors.IsNotFound(err) {
			return errString("still there")
		}
		return nil
	})
}

// scenarioReembedThirdModelThrough: a third model that got past admission
// (a CRD of an earlier release, without the rule) while a re-embed runs is
// still handled by the operator: it aborts the re-embed and begins again
// from the recorded embedder toward the third. The test stands for the
// earlier CRD by hiding the re-embed from the rule while the operator is
// paused: phase Switched during the spec change, Filling again after it.
func scenarioReembedThirdModelThrough(e *operatorEnv, t *testing.T) {
	ns, _, setModel := reembedSetup(e, t, "reembed-third")
	setModel("model-b", nil)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonReembedding)
	modelA := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-a", Dimensions: 384}
	modelC := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "model-c", Dimensions: 384}
	runs := got.Status.Reembed.Runs
	yes, no := true, false
	setModel("model-b", &yes)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionPaused, true, "")
	setPhase := func(phase string) {
		t.Helper()
		eventually(t, "status.reembed.phase "+phase, 10*time.Second, func() error {
			var cur memoryv1alpha1.MemoryRuntime
			if err := e.get(t, ns, "bot", &cur); err != nil {
				return err
			}
			cur.Status.Reembed.Phase = phase
			return e.c.Status().Update(testContext(t), &cur)
		})
	}
	setPhase(memoryv1alpha1.ReembedSwitched)
	setModel("model-c", nil)
	setPhase(memoryv1alpha1.ReembedFilling)
	setModel("model-c", &no)
	eventually(t, "the re-embed toward model-c", 30*time.Second, func() error {
		var rt memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, "bot", &rt); err != nil {
			return err
		}
		if re := rt.Status.Reembed; re == nil || re.From != modelA || re.To != modelC || re.Phase != memoryv1alpha1.ReembedFilling || re.Runs != runs+1 {
			return fmt.Errorf("status.reembed = %+v, want Filling model-a → model-c, run %d", re, runs+1)
		}
		return nil
	})
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonReembedAborted, "spec.embedding now names openai model \"model-c\"")
	job := e.reembedJob(t, ns, naming.ReembedJobName("bot", runs+1))
	if cmd := job.Spec.Template.Spec.Containers[0].Command; !slices.Contains(cmd, "--reembed-model=model-c") {
		t.Errorf("the re-embed Job runs %q, want --reembed-model=model-c", cmd)
	}
}

// dryRunUpdate dry-runs an update of the stored runtime and returns the API
// server's answer; a status write of the operator between the read and the
// update (a conflict) makes it read again (bounded).
func (e *operatorEnv) dryRunUpdate(t *testing.T, ns, name string, mutate func(*memoryv1alpha1.MemoryRuntime)) error {
	t.Helper()
	var err error
	for range 20 {
		var cur memoryv1alpha1.MemoryRuntime
		if err = e.get(t, ns, name, &cur); err != nil {
			t.Fatal(err)
		}
		mutate(&cur)
		if err = e.c.Update(testContext(t), &cur, client.DryRunAll); !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
