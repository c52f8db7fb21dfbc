package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// The re-embed step (issue 29): CopyRuntime, holding alice's imported
// memories and conversation, gets a few hundred more memories and moves to
// another embedding model served by the FakeEmbedder, while a searcher
// keeps calling search.
const (
	// EmbedderSecret holds the fake's key (key apiKey), as a user's Secret
	// holds a real provider's.
	EmbedderSecret = "demo-embedder"
	// DemoModelA and DemoModelB are the fake's models: the step moves the
	// copy to A, and from A to B on a second run of the demo.
	DemoModelA = "engram-demo-embed-a"
	DemoModelB = "engram-demo-embed-b"
	// reembedOwner gets reembedSeed memories (three batches of 100).
	reembedOwner = "carol"
	reembedSeed  = 300
	// searchEvery paces the searcher; maxSearches bounds it (a minute
	// and a half of searches).
	searchEvery = 100 * time.Millisecond
	maxSearches = 900
)

// reembedQuery is the search of the step: the transfer step's, whose
// answer (alice's dark-mode preference) is known.
var reembedQuery = "which editor theme does alice like"

// ReembedReport is what the model-change step showed (docs/operations.md,
// "Changing the embedding model").
type ReembedReport struct {
	Runtime       string
	LocalEndpoint string // its memory service here
	From, To      memoryv1alpha1.RuntimeEmbedder
	Seeded        int // memories the step added for reembedOwner
	// Phase, Filled and Left are status.reembed's at the end; Job the last
	// Job it named; Progress the status lines printed on the way.
	Phase        string
	Filled, Left int64
	Job          string
	Progress     int
	// SearchesDuring are the searches answered between the spec change
	// and the switch, SearchErrors those that failed (FirstError the first).
	// SearchesRetried did not reach the service at first (its process
	// replaced) and were sent again.
	SearchesDuring, SearchErrors, SearchesRetried int
	FirstError                                    string
	// AfterTop is the best hit of a vector-only search after the rollout
	// with the new model; NewModelTexts the texts the fake embedded with it
	// (the Job's fill, the service's queries).
	AfterTop      string
	NewModelTexts int64
	SwitchedAfter time.Duration // from the spec change to phase Switched
	Took          time.Duration
}

// reembed changes CopyRuntime's spec.embedding to a model of the fake and
// follows the re-embed to the switch while a searcher runs.
func (s *Scenario) reembed(ctx context.Context, r *Report) error {
	if s.Embedder == nil {
		s.printf("   skipped: no embeddings server the pods can reach. make demo's environment runs a fake one on 127.0.0.1\n" +
			"   (one started before this step existed does not: make demo-down, then make demo); the pods of a real\n" +
			"   node (make demo-node) cannot reach this machine's 127.0.0.1\n")
		return nil
	}
	start := time.Now()
	rep := &ReembedReport{Runtime: CopyRuntime}
	r.Reembed = rep
	api, err := s.api(ctx, &Report{Runtime: CopyRuntime})
	if err != nil {
		return err
	}
	if err := s.ensureEmbedderSecret(ctx); err != nil {
		return err
	}
	var rt memoryv1alpha1.MemoryRuntime
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: CopyRuntime}, &rt); err != nil {
		return fmt.Errorf("reading runtime %s: %w", CopyRuntime, err)
	}
	if rt.Status.Embedding == nil || rt.Spec.Embedding.Dimensions != FakeEmbedderDims {
		return fmt.Errorf("runtime %s records no embedder or has %d dimensions (the fake serves %d)", CopyRuntime, rt.Spec.Embedding.Dimensions, FakeEmbedderDims)
	}
	if rep.Seeded, err = seedMemories(ctx, api); err != nil {
		return err
	}
	rep.From = *rt.Status.Embedding
	rep.To = memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: DemoModelA, Dimensions: FakeEmbedderDims}
	if rep.From.Model == DemoModelA {
		rep.To.Model = DemoModelB
	}
	alice := 0
	if r.Transfer != nil {
		alice = r.Transfer.CopyAlice
	}
	s.printf("   %s: %d memories added for %s (alice's %d memories and her conversation came with the import)\n",
		CopyRuntime, rep.Seeded, reembedOwner, alice)
	s.printf("   model server: %s, a fake OpenAI-compatible /v1/embeddings that stands in for a real model server\n"+
		"   (deterministic vectors, one space per model name); its key is in Secret %s\n", s.Embedder.URL, EmbedderSecret)

	searcher := s.startSearcher(ctx, api.Token)
	changed := time.Now()
	err = s.changeModel(ctx, &rt, rep.To.Model)
	if err == nil {
		s.printf("   spec.embedding: %s -> %s (endpoint %s)\n", embedderText(rep.From), embedderText(rep.To), s.Embedder.URL)
		err = s.followReembed(ctx, rep, searcher)
	}
	rep.SearchesDuring, rep.SearchErrors, rep.SearchesRetried, rep.FirstError = searcher.stop()
	if err != nil {
		return err
	}
	rep.SwitchedAfter = time.Since(changed)
	s.printf("   switched after %s: %d rows re-embedded, %d left; %d searches answered during the re-embed, %d errors (%d sent again)\n",
		rep.SwitchedAfter.Round(100*time.Millisecond), rep.Filled, rep.Left, rep.SearchesDuring, rep.SearchErrors, rep.SearchesRetried)
	if rep.FirstError != "" {
		s.printf("   first search error: %s\n", rep.FirstError)
	}
	if err := s.searchAfterSwitch(ctx, rep, api.Token); err != nil {
		return err
	}
	rep.LocalEndpoint = s.Endpoint(s.Namespace, CopyRuntime)
	if rep.NewModelTexts, err = fakeTexts(ctx, *s.Embedder, rep.To.Model); err != nil {
		return err
	}
	rep.Took = time.Since(start)
	s.printf("   the fake embedded %d texts with %s (the Job's fill and the service's queries); step took %s\n",
		rep.NewModelTexts, rep.To.Model, rep.Took.Round(100*time.Millisecond))
	return nil
}

func embedderText(e memoryv1alpha1.RuntimeEmbedder) string {
	if e.Model == "" {
		return fmt.Sprintf("%s/%d", e.Provider, e.Dimensions)
	}
	return fmt.Sprintf("%s %s/%d", e.Provider, e.Model, e.Dimensions)
}

// ensureEmbedderSecret writes the fake's key into EmbedderSecret.
func (s *Scenario) ensureEmbedderSecret(ctx context.Context) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: EmbedderSecret, Namespace: s.Namespace}}
	data := map[string][]byte{memoryv1alpha1.DefaultAPIKeyKey: []byte(s.Embedder.APIKey)}
	err := s.Client.Get(ctx, client.ObjectKeyFromObject(sec), sec)
	switch {
	case apierrors.IsNotFound(err):
		sec.Data = data
		err = s.Client.Create(ctx, sec)
	case err == nil:
		sec.Data = data
		err = s.Client.Update(ctx, sec)
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s: %w", EmbedderSecret, err)
	}
	return nil
}

// seedMemories replaces reembedOwner's memories by reembedSeed new ones
// and returns how many were added.
func seedMemories(ctx context.Context, api *API) (int, error) {
	if err := api.Do(ctx, http.MethodDelete, "/v1/owners/"+reembedOwner, nil, nil); err != nil {
		return 0, err
	}
	subjects := []string{"The billing service", "The mobile app", "Our staging cluster", "The data warehouse", "The search team",
		"The on-call rotation", "The design system", "The payments gateway", "The support desk", "The release train",
		"The analytics pipeline", "The identity provider"}
	verbs := []string{"moved", "was audited", "doubled", "was paused", "got a new owner"}
	objects := []string{"after the spring outage in Lisbon", "because quarterly costs grew", "before the Tokyo launch",
		"while Carol led the migration", "during the security review"}
	added := 0
	var items []map[string]any
	flush := func() error {
		var res struct {
			Results []memory.AddResult `json:"results"`
		}
		if err := api.Do(ctx, http.MethodPost, "/v1/owners/"+reembedOwner+"/memories/batch", map[string]any{"items": items}, &res); err != nil {
			return err
		}
		for _, a := range res.Results {
			if a.Action == memory.ActionAdded {
				added++
			}
		}
		items = items[:0]
		return nil
	}
	for i := range reembedSeed {
		o := objects[i%len(objects)]
		v := verbs[(i/len(objects))%len(verbs)]
		subj := subjects[(i/(len(objects)*len(verbs)))%len(subjects)]
		items = append(items, map[string]any{"content": fmt.Sprintf("%s %s %s (ticket OPS-%d)", subj, v, o, 1000+i), "category": "project"})
		if len(items) == 100 {
			if err := flush(); err != nil {
				return added, err
			}
		}
	}
	if len(items) > 0 {
		return added, flush()
	}
	return added, nil
}

// changeModel points rt's spec.embedding at the fake's model.
func (s *Scenario) changeModel(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime, model string) error {
	patch := client.MergeFrom(rt.DeepCopy())
	rt.Spec.Embedding = memoryv1alpha1.EmbeddingSpec{
		Provider: memoryv1alpha1.EmbeddingOpenAI, Model: model, Dimensions: rt.Spec.Embedding.Dimensions, Endpoint: s.Embedder.URL,
		APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: EmbedderSecret},
	}
	if err := s.Client.Patch(ctx, rt, patch); err != nil {
		return fmt.Errorf("changing %s's spec.embedding to %s: %w", rt.Name, model, err)
	}
	return nil
}

// followReembed prints status.reembed whenever it changes until it reads
// Switched toward rep.To.
func (s *Scenario) followReembed(ctx context.Context, rep *ReembedReport, sr *searcher) error {
	last := ""
	return s.poll(ctx, "the re-embed to "+rep.To.Model+" to switch", func() (bool, error) {
		var rt memoryv1alpha1.MemoryRuntime
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: CopyRuntime}, &rt); err != nil {
			return false, err
		}
		if err := s.checkStalled(ctx, &rt); err != nil {
			return false, err
		}
		re := rt.Status.Reembed
		if re == nil || re.To != rep.To {
			return false, nil // not begun yet (an earlier run's re-embed names another model)
		}
		rep.Phase, rep.Filled, rep.Left = re.Phase, re.Filled, re.Left
		if re.Phase != memoryv1alpha1.ReembedSwitched {
			rep.Job = naming.ReembedJobName(CopyRuntime, re.Runs)
		}
		line := fmt.Sprintf("%s: %d filled, %d left", re.Phase, re.Filled, re.Left)
		if re.Phase == memoryv1alpha1.ReembedFilling && re.Filled == 0 && re.Left == 0 {
			line = "Filling: begun (rows not counted yet)" // the intent, written before the begin
		}
		if line != last {
			last = line
			rep.Progress++
			served, failed, _, _ := sr.counts()
			s.printf("   status.reembed %-36s  (Job %s; searches so far %d, errors %d)\n", line, rep.Job, served, failed)
		}
		switch re.Phase {
		case memoryv1alpha1.ReembedSwitched:
			return true, nil
		case memoryv1alpha1.ReembedAborted:
			return false, fmt.Errorf("the re-embed to %s was aborted", rep.To.Model)
		}
		return false, nil
	})
}

// searchAfterSwitch waits for the rollout with the new model and searches
// by vector only: the query is embedded by the new model and compared with
// the vectors the Job made.
func (s *Scenario) searchAfterSwitch(ctx context.Context, rep *ReembedReport, token string) error {
	if err := s.poll(ctx, "runtime "+CopyRuntime+" to be Ready with "+rep.To.Model, func() (bool, error) {
		var rt memoryv1alpha1.MemoryRuntime
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: CopyRuntime}, &rt); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(rt.Status.Conditions, memoryv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == rt.Generation, nil
	}); err != nil {
		return err
	}
	body := map[string]any{"query": reembedQuery, "mode": "vector", "topK": 1}
	// The rollout replaces the service's process (another port): each try
	// asks for its current address, and the answer counts once the fake
	// says it embedded the query with the new model (an old process still
	// answering embeds it with the old one). Nothing else embeds with the
	// new model by now: the Job ended at the switch and the searcher stopped.
	err := s.poll(ctx, "a search answered under "+rep.To.Model, func() (bool, error) {
		base := s.Endpoint(s.Namespace, CopyRuntime)
		if base == "" {
			return false, nil
		}
		before, err := fakeTexts(ctx, *s.Embedder, rep.To.Model)
		if err != nil {
			return false, err
		}
		var res struct {
			Results []memory.SearchHit `json:"results"`
		}
		api := &API{Base: base, Token: token}
		if err := api.Do(ctx, http.MethodPost, "/v1/owners/alice/search", body, &res); err != nil {
			return false, err
		}
		after, err := fakeTexts(ctx, *s.Embedder, rep.To.Model)
		if err != nil || after == before {
			return false, err
		}
		if len(res.Results) > 0 {
			rep.AfterTop = res.Results[0].Memory.Content
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	s.printf("   Ready with %s; vector search %q (query embedded by the new model) -> %q\n", rep.To.Model, reembedQuery, rep.AfterTop)
	return nil
}

// searcher calls search every searchEvery until stopped or maxSearches,
// at the service's current address (a rollout starts a new local process
// on another port, as a Service would route to the new pod). A request
// that does not reach the service (connection refused while the old
// process is replaced) is retried once at the current address, as a
// client would, and counted as retried; it is an error only when the retry
// fails too.
type searcher struct {
	mu                      sync.Mutex
	served, failed, retried int
	first                   string
	cancel                  context.CancelFunc
	done                    chan struct{}
}

func (s *Scenario) startSearcher(ctx context.Context, token string) *searcher {
	ctx, cancel := context.WithCancel(ctx)
	sr := &searcher{cancel: cancel, done: make(chan struct{})}
	body := map[string]any{"query": reembedQuery, "mode": "hybrid", "topK": 3}
	search := func() error {
		api := &API{Base: s.Endpoint(s.Namespace, CopyRuntime), Token: token}
		return api.Do(ctx, http.MethodPost, "/v1/owners/alice/search", body, nil)
	}
	go func() {
		defer close(sr.done)
		for range maxSearches {
			err := search()
			var se *StatusError
			retried := err != nil && !errors.As(err, &se) && ctx.Err() == nil
			if retried {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				err = search()
			}
			if ctx.Err() != nil {
				return // stopped: the search cut short is not counted
			}
			sr.mu.Lock()
			if retried {
				sr.retried++
			}
			if err != nil {
				sr.failed++
				if sr.first == "" {
					sr.first = err.Error()
				}
			} else {
				sr.served++
			}
			sr.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(searchEvery):
			}
		}
	}()
	return sr
}

func (sr *searcher) counts() (served, failed, retried int, first string) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.served, sr.failed, sr.retried, sr.first
}

// stop ends the searches and returns their counts.
func (sr *searcher) stop() (served, failed, retried int, first string) {
	sr.cancel()
	<-sr.done
	return sr.counts()
}

// repointCopy: a CopyRuntime that an earlier run moved to a model of the
// fake names that run's fake (another port once the demo environment
// restarted). It is pointed at this run's fake, the same model: the
// embedder stays the same, so that is a rollout, not a re-embed.
func (s *Scenario) repointCopy(ctx context.Context) error {
	var rt memoryv1alpha1.MemoryRuntime
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: CopyRuntime}, &rt); err != nil {
		return fmt.Errorf("reading runtime %s: %w", CopyRuntime, err)
	}
	e := rt.Spec.Embedding
	if s.Embedder == nil || e.Provider != memoryv1alpha1.EmbeddingOpenAI || e.Endpoint == s.Embedder.URL ||
		(e.Model != DemoModelA && e.Model != DemoModelB) {
		return nil
	}
	if err := s.ensureEmbedderSecret(ctx); err != nil {
		return err
	}
	s.printf("   %s uses %s of an earlier run's fake embedder: pointed at this run's (%s)\n", CopyRuntime, e.Model, s.Embedder.URL)
	return s.changeModel(ctx, &rt, e.Model)
}
