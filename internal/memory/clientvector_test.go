package memory

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
)

// clientDims is the runtime's dimension in the client-vector tests.
const clientDims = 64

// countingEmbedderFixture is a store whose embedder is an OpenAI-compatible
// fake in httptest that counts its calls; every text it embeds becomes the
// same unit vector e0, so a write or query it embedded would look
// identical to every other one.
func countingEmbedderFixture(t *testing.T) (*fixture, *atomic.Int64) {
	t.Helper()
	srv, calls := embeddingServer(t, func(w http.ResponseWriter, in []string, _ int64) {
		data := make([]any, len(in))
		for i := range in {
			v := make([]float32, clientDims)
			v[0] = 1
			data[i] = map[string]any{"index": i, "embedding": v}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	})
	return newFixture(t, withEmbedder(newTestOpenAIEmbedder(srv, clientDims))), calls
}

// unit is the unit vector along axis i, tilted by a little of axis j so no
// two test vectors are the embedder's e0.
func unit(i, j int) []float32 {
	v := make([]float32, clientDims)
	v[i], v[j] = 0.99, float32(math.Sqrt(1-0.99*0.99))
	return v
}

// axis is the vector with x along axis i and nothing else.
func axis(i int, x float32) []float32 {
	v := make([]float32, clientDims)
	v[i] = x
	return v
}

func fieldError(t *testing.T, err error, field string) string {
	t.Helper()
	var ve *core.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a validation error on %s, got %v", field, err)
	}
	for _, f := range ve.Fields {
		if f.Field == field {
			return f.Message
		}
	}
	t.Fatalf("no error on %s in %v", field, err)
	return ""
}

func TestClientVectorAddCallsNoEmbedderAndIsFound(t *testing.T) {
	f, calls := countingEmbedderFixture(t)
	v := unit(5, 6)
	r := f.add(AddRequest{Owner: "u1", Content: "The user flies to Lisbon in May", Embedding: v})
	f.add(AddRequest{Owner: "u1", Content: "The user keeps bees", Embedding: unit(9, 10)})
	if r.Action != ActionAdded {
		t.Fatalf("action %s, want added", r.Action)
	}
	for _, mode := range []SearchMode{SearchVector, SearchHybrid} {
		hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "Lisbon", Vector: v, Mode: mode})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(hits) != 2 || hits[0].Memory.ID != r.Memory.ID || math.Abs(1-hits[0].VectorScore) > 1e-6 {
			t.Fatalf("%s: top hit %+v, want %s at distance ~0", mode, hits, r.Memory.ID)
		}
	}
	// Vector mode needs no text when the vector is given.
	if _, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Vector: v, Mode: SearchVector}); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the embedder was called %d times; client vectors must spare every call", n)
	}
	// Without a vector the embedder is used as before.
	f.add(AddRequest{Owner: "u1", Content: "The user likes tea"})
	if calls.Load() != 1 {
		t.Fatalf("embedder calls %d, want 1 for the add without a vector", calls.Load())
	}
}

func TestClientVectorWrongDimensionRefusedAndNothingWritten(t *testing.T) {
	f, calls := countingEmbedderFixture(t)
	nan := unit(1, 2)
	nan[3] = float32(math.NaN())
	inf := unit(1, 2)
	inf[4] = float32(math.Inf(1))
	cases := []struct {
		name string
		vec  []float32
		want string
	}{
		{"short", make([]float32, clientDims-1), "has 63 dimensions, the runtime's embeddings have 64"},
		{"long", make([]float32, clientDims+1), "has 65 dimensions, the runtime's embeddings have 64"},
		{"empty", []float32{}, "has 0 dimensions"},
		{"nan", nan, "value 3 is not a finite number"},
		{"inf", inf, "value 4 is not a finite number"},
		{"zero", make([]float32, clientDims), "must not be all zeros"},
		// Issue 26's sixteenth review, HIGH 1: pgvector sums the squares in
		// float32; these made every search of their owner fail with NaN.
		{"tiny", axis(0, 1e-30), "must not be all zeros"},
		{"subnormal", axis(0, 1e-20), "too close to zero"},
		{"huge", axis(0, 1e20), "too long"},
	}
	for _, c := range cases {
		_, err := f.store.Add(ctx(t), AddRequest{Owner: "u1", Content: "fact " + c.name, Embedding: c.vec})
		if msg := fieldError(t, err, "embedding"); !strings.Contains(msg, c.want) {
			t.Errorf("add %s: %q, want %q", c.name, msg, c.want)
		}
		_, err = f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "fact", Vector: c.vec, Mode: SearchVector})
		if msg := fieldError(t, err, "vector"); !strings.Contains(msg, c.want) {
			t.Errorf("search %s: %q, want %q", c.name, msg, c.want)
		}
	}
	// A batch with one bad vector writes none of its items.
	_, err := f.store.AddBatch(ctx(t), []AddRequest{
		{Owner: "u1", Content: "good one", Embedding: unit(1, 2)},
		{Owner: "u1", Content: "bad one", Embedding: make([]float32, 3)},
	})
	fieldError(t, err, "items[1].embedding")
	_, err = f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "x", Vector: unit(1, 2), Mode: SearchText})
	fieldError(t, err, "vector")
	_, err = f.store.Search(ctx(t), SearchRequest{Owner: "u1", Vector: unit(1, 2), Mode: SearchHybrid})
	fieldError(t, err, "query")
	if n := f.count(`SELECT count(*) FROM %s`); n != 0 {
		t.Fatalf("%d rows written by refused adds", n)
	}
	if calls.Load() != 0 {
		t.Fatalf("the embedder was called %d times for refused requests", calls.Load())
	}
}

func TestClientVectorDedup(t *testing.T) {
	f, calls := countingEmbedderFixture(t)
	first := f.add(AddRequest{Owner: "u1", Content: "The user is vegetarian", Embedding: unit(5, 6)})
	// The same vector with other words: the client says it is the same
	// fact, so it merges (the fake embedder would say so too).
	same := f.add(AddRequest{Owner: "u1", Content: "The user eats no meat", Embedding: unit(5, 6)})
	if same.Action != ActionMerged || same.Memory.ID != first.Memory.ID || same.Similarity < 0.999 {
		t.Fatalf("same vector: %s into %s (similarity %f), want merged into %s", same.Action, same.Memory.ID, same.Similarity, first.Memory.ID)
	}
	// An orthogonal vector: a new memory, where the fake embedder (e0 for
	// every text) would have merged it.
	other := f.add(AddRequest{Owner: "u1", Content: "The user plays chess", Embedding: unit(20, 21)})
	if other.Action != ActionAdded || other.Similarity > 0.1 {
		t.Fatalf("orthogonal vector: %s (similarity %f), want added", other.Action, other.Similarity)
	}
	if calls.Load() != 0 {
		t.Fatalf("the embedder was called %d times", calls.Load())
	}
}

func TestClientVectorUpdate(t *testing.T) {
	f, calls := countingEmbedderFixture(t)
	m := f.add(AddRequest{Owner: "u1", Content: "The user lives in Porto", Embedding: unit(5, 6)})
	f.add(AddRequest{Owner: "u1", Content: "The user keeps bees", Embedding: unit(9, 10)})
	content, w := "The user lives in Lisbon", unit(30, 31)
	if _, err := f.store.Update(ctx(t), UpdateRequest{Owner: "u1", ID: m.Memory.ID, Content: &content, Embedding: w}); err != nil {
		t.Fatal(err)
	}
	hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Vector: w, Mode: SearchVector})
	if err != nil {
		t.Fatal(err)
	}
	if hits[0].Memory.ID != m.Memory.ID || math.Abs(1-hits[0].VectorScore) > 1e-6 {
		t.Fatalf("top hit %+v, want the updated memory at distance ~0", hits[0])
	}
	imp := 7
	_, err = f.store.Update(ctx(t), UpdateRequest{Owner: "u1", ID: m.Memory.ID, Importance: &imp, Embedding: w})
	fieldError(t, err, "embedding")
	_, err = f.store.Update(ctx(t), UpdateRequest{Owner: "u1", ID: m.Memory.ID, Content: &content, Embedding: w[:10]})
	fieldError(t, err, "embedding")
	if calls.Load() != 0 {
		t.Fatalf("the embedder was called %d times", calls.Load())
	}
}
