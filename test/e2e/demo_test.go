// Package e2e runs Engram's whole flow — the same scenario `make demo`
// shows — against a real kube-apiserver + etcd, the operator, real
// PostgreSQL and real memory-service and job processes, and asserts each step.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/localpod"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// buildManager builds the manager binary the local pods run.
func buildManager(t *testing.T) string { return testenv.BuildManager(t) }

// logWriter sends the scenario's output to the test log, a line at a time.
type logWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// demoEnv is the demo's environment in a test: a control plane, the
// operator, the local pod runner, PostgreSQL and a namespace of its own.
type demoEnv struct {
	c       client.Client
	cfg     *rest.Config
	kubelet *localpod.Kubelet
	ns      string
	// embedder is the fake model server of the re-embed step (the local
	// pods are processes here: they reach its 127.0.0.1).
	embedder *demo.FakeEmbedder
}

func startDemoEnv(t *testing.T, ctx context.Context) *demoEnv {
	t.Helper()
	dbURL := testenv.NewDatabase(t)
	citusURL := testenv.NewCitusDatabase(t)
	citusAdmin := testenv.NewPool(t, citusURL, 2)
	_, cfg := testenv.ControlPlane(t)
	binary := buildManager(t)

	c, err := demo.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A namespace of its own: tenant roles are named after it and are
	// cluster-wide, so this must not collide with a demo on the same server.
	ns := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1e6)
	if err := demo.Prepare(ctx, c, dbURL, citusURL, ns); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(&logWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opCtx, stopOperator := context.WithCancel(ctx)
	opDone, err := demo.StartOperator(opCtx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := demo.NewKubelet(cfg, binary, t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	kCtx, stopKubelet := context.WithCancel(ctx)
	kDone := make(chan error, 1)
	go func() { kDone <- kubelet.Run(kCtx) }()
	fake, err := demo.StartFakeEmbedder("e2e-" + ns)
	if err != nil {
		t.Fatal(err)
	}
	e := &demoEnv{c: c, cfg: cfg, kubelet: kubelet, ns: ns, embedder: fake}
	t.Cleanup(func() {
		stopKubelet()
		<-kDone
		_ = fake.Close()
		stopOperator()
		<-opDone
		// Roles are cluster-wide in PostgreSQL: drop the tenants of every
		// runtime of the namespace, the story's or not, Ready or not.
		admin := testenv.NewPool(t, dbURL, 2)
		var list memoryv1alpha1.MemoryRuntimeList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Logf("listing the runtimes: %v", err)
		}
		for _, rt := range list.Items {
			if rt.Status.Schema == "" {
				continue
			}
			owner := tenant.Owner{UID: string(rt.UID), Namespace: rt.Namespace, Name: rt.Name}
			on := admin
			if rt.Status.CitusWorker != "" {
				on = citusAdmin // the tenant on Citus: its roles live on the Citus nodes
			}
			if _, err := tenant.Drop(context.Background(), on, rt.Status.Schema, owner); err != nil {
				t.Logf("dropping tenant %s: %v", rt.Status.Schema, err)
			}
		}
	})
	return e
}

// scenario is the demo's scenario in the environment.
func (e *demoEnv) scenario(t *testing.T) *demo.Scenario {
	return &demo.Scenario{
		Client: e.c, Config: e.cfg, Out: &logWriter{t: t}, Endpoint: e.kubelet.Endpoint, Namespace: e.ns,
		SamplesDir: filepath.Join(testenv.RepoRoot(), "config", "samples"), Wait: 2 * time.Minute, Citus: true,
		Embedder: &e.embedder.Server,
	}
}

// play runs the demo's scenario in the environment.
func (e *demoEnv) play(t *testing.T, ctx context.Context) *demo.Report {
	t.Helper()
	r, err := e.scenario(t).Run(ctx)
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	return r
}

func TestDemoFlow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startDemoEnv(t, ctx)
	r := e.play(t, ctx)

	citus := demo.CitusReport{}
	if r.Citus != nil {
		citus = *r.Citus
	}
	tr := demo.TransferReport{}
	if r.Transfer != nil {
		tr = *r.Transfer
	}
	first, second := ptr.Deref(tr.First, memory.ImportResult{}), ptr.Deref(tr.Second, memory.ImportResult{})
	re := ptr.Deref(r.Reembed, demo.ReembedReport{})
	// Every row of the copy: alice's imported memories and 200 messages,
	// carol's seeded memories (and the conversation's summaries).
	minRows := int64(re.Seeded + tr.CopyAlice + 200)
	checks := []struct {
		what string
		ok   bool
	}{
		{"the story follows support-bot, the samples' runtime", r.Runtime == "support-bot"},
		{"the second tenant was placed on the Citus MemoryDatabase", citus.Database == demo.CitusDatabase && citus.Schema != ""},
		{"its status names the Citus worker holding its schema, one of the database's workers", citus.Worker != "" && slices.Contains(citus.Workers, citus.Worker)},
		{"its service adds and finds through the coordinator", citus.Added == string(memory.ActionAdded) && strings.Contains(citus.SearchTop, "quarterly research")},
		{"the samples applied (a policy, a runtime and a retention job)", len(r.Applied) >= 3},
		{"the runtime has a schema and an in-cluster endpoint", r.Schema != "" && strings.HasPrefix(r.ClusterEndpoint, "http://")},
		{"one near-duplicate was merged", r.Actions[string(memory.ActionMerged)] == 1},
		{"ten memories were added", r.Actions[string(memory.ActionAdded)] == 10},
		{"secrets were redacted", slices.Contains(r.Redactions, "url_password") && slices.Contains(r.Redactions, "github_token")},
		{"the prompt injection was rejected with a 422 problem", r.InjectionRejected && strings.Contains(r.InjectionProblem, "injection")},
		{"alice has 6 memories, bob 4", r.ActiveAlice == 6 && r.ActiveBob == 4},
		{"an agent token bound to alice writes for alice", r.AgentOwnWrite == string(memory.ActionAdded)},
		{"it is refused a protected write (403 protected)", r.AgentProtected != nil && r.AgentProtected.Status == 403 && strings.HasSuffix(r.AgentProtected.Problem.Type, "/protected")},
		{"it is refused another owner (403 owner-not-allowed)", r.AgentOtherOwner != nil && r.AgentOtherOwner.Status == 403 && strings.HasSuffix(r.AgentOtherOwner.Problem.Type, "/owner-not-allowed")},
		{"hybrid search ranks the dark-mode preference first", strings.Contains(strings.ToLower(r.SearchTop), "dark mode")},
		{"context starts with the pinned identity", strings.HasPrefix(r.Context, "## identity\n- Alice is allergic to peanuts")},
		{"context stays within its budget and never leaks secrets", len(r.Context) <= 120*4 && !strings.Contains(r.Context, "hunter2")},
		{"erasing bob deleted his 4 memories and their history", r.Erased.Memories == 4 && r.Erased.History >= 4 && r.BobAfterErase == 0},
		{"a 200-message conversation was appended", r.Conversation.Appended == 200},
		{"it was compacted into summaries without an LLM", r.Conversation.Compaction.LeavesCreated > 0 && r.Conversation.Compaction.Method == memory.MethodExtractive},
		{"the summary window starts with summaries and keeps its budget", r.Conversation.WindowSummaries > 0 && r.Conversation.WindowTokens <= 1000},
		{"a root summary expands back to its messages, byte for byte", r.Conversation.ExpandedMessages > 0 && r.Conversation.ExpandedExact},
		{"ending a 3-turn session wrote an episode without an LLM", r.Episode.Episode != nil && r.Episode.Episode.UserTurns == 3 && r.Episode.Episode.Method == memory.MethodExtractive},
		{"the episode search ranks it first", r.Episode.Found},
		{"status.lastRun came from the Job's termination message", r.LastRun != nil && r.LastRun.Result == memoryv1alpha1.RunSucceeded && len(r.LastRun.Operations) > 0},
		{"the tenant's export (after the erase) holds alice only, her memories and her conversation", slices.Equal(tr.Owners, []string{"alice"}) && tr.Records["memory"] >= 6 && tr.Records["message"] >= 200},
		{"the export's header counts, trailer counts and records read are equal", tr.Parts >= 1 && maps.Equal(nonZero(tr.Header), nonZero(tr.Trailer)) && maps.Equal(nonZero(tr.Trailer), nonZero(tr.Records))},
		{"each part's trailer carries the SHA-256 of its lines", tr.ChecksumsMatch},
		{"the second runtime has a schema of its own", tr.Runtime == demo.CopyRuntime && tr.Schema != "" && tr.Schema != r.Schema},
		{"the first import read and inserted every record of the export", maps.Equal(nonZero(first.Records), nonZero(tr.Trailer)) && maps.Equal(nonZero(first.Inserted), nonZero(tr.Trailer)) && first.Owners == 1},
		{"the second import inserted nothing and found every memory there", second.Inserted.Total() == 0 && second.Existing["memory"] == tr.Trailer["memory"] && second.Existing.Total() > 0},
		{"alice has as many memories in the copy as in the source", tr.SourceAlice > 0 && tr.CopyAlice == tr.SourceAlice},
		{"a search in the second runtime finds alice's dark-mode preference", strings.Contains(strings.ToLower(tr.SearchTop), "dark mode")},
		{"the re-embed step seeded 300 memories into the copy", re.Seeded == 300},
		{"the copy moved from builtin to the fake's model A", re.Runtime == demo.CopyRuntime && re.From.Provider == memoryv1alpha1.EmbeddingBuiltin &&
			re.To.Provider == memoryv1alpha1.EmbeddingOpenAI && re.To.Model == demo.DemoModelA},
		{"the re-embed switched with every row re-embedded and none left", re.Phase == memoryv1alpha1.ReembedSwitched && re.Left == 0 && re.Filled >= minRows},
		{"searches were answered during the re-embed, none failed", re.SearchesDuring > 0 && re.SearchErrors == 0},
		{"after the switch a vector search under the new model finds alice's dark-mode preference", strings.Contains(strings.ToLower(re.AfterTop), "dark mode")},
		{"the fake embedded every row and the search's query with the new model", re.NewModelTexts > re.Filled && e.embedder.Texts(demo.DemoModelA) > re.Filled},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("FAILED: %s (report %+v)", c.what, *r)
		}
	}
	if t.Failed() {
		t.Logf("transfer %+v; first import %+v; second import %+v; re-embed %+v", tr, first, second, re)
	}
	if r.LastRun != nil {
		var scanned int64
		for _, op := range r.LastRun.Operations {
			scanned += op.Scanned
		}
		if scanned == 0 {
			t.Errorf("the maintenance run scanned nothing: %+v", r.LastRun.Operations)
		}
	}
}

// nonZero is counts without the kinds of no rows (a header lists every
// kind, an answer may not).
func nonZero(counts map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range counts {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestDemoTellsTheSamplesStory: a second runtime in the demo's namespace
// (as the demo's "Explore" hints invite; its name sorts before the
// samples') changes nothing of the story: the memories go through
// support-bot's service, and the report describes support-bot.
func TestDemoTellsTheSamplesStory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startDemoEnv(t, ctx)
	other := &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "another-bot", Namespace: e.ns},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database:  memoryv1alpha1.DatabaseSpec{ClusterConnection: demo.ConnectionName},
			Embedding: memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingBuiltin, Dimensions: 384},
			Service:   memoryv1alpha1.ServiceSpec{Replicas: ptr.To(int32(1))},
		},
	}
	if err := e.c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	// Ready before the story starts, like a runtime added on an earlier run.
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(other.Status.Conditions, memoryv1alpha1.ConditionReady), nil
	})
	if err != nil {
		t.Fatalf("another-bot not Ready: %v", err)
	}
	r := e.play(t, ctx)
	var rt memoryv1alpha1.MemoryRuntime
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "support-bot"}, &rt); err != nil {
		t.Fatal(err)
	}
	if r.Runtime != "support-bot" || r.Schema != rt.Status.Schema || r.LocalEndpoint != e.kubelet.Endpoint(e.ns, "support-bot") {
		t.Errorf("the story was told with runtime %q (schema %s, service %s), want support-bot (schema %s, service %s)",
			r.Runtime, r.Schema, r.LocalEndpoint, rt.Status.Schema, e.kubelet.Endpoint(e.ns, "support-bot"))
	}
	if r.ActiveAlice != 6 || r.LastRun == nil {
		t.Errorf("the samples' story did not run through: alice has %d memories, last run %+v", r.ActiveAlice, r.LastRun)
	}
}
