package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestExactRecall: recall counts the exact top-k by cosine distance,
// accepts a tie with the k-th in either order, ignores ids that are not
// the owner's, and is 1 for an owner with fewer rows than k when all come.
func TestExactRecall(t *testing.T) {
	q := []float32{1, 0}
	rows := []ownerRow{
		{id: "a", vec: []float32{1, 0}},     // distance 0
		{id: "b", vec: []float32{1, 0.1}},   // small
		{id: "c", vec: []float32{0, 1}},     // 1
		{id: "c2", vec: []float32{0, 2}},    // 1, tied with c
		{id: "d", vec: []float32{-1, 0.1}},  // far
		{id: "e", vec: []float32{-1, -0.1}}, // far
	}
	cases := []struct {
		name string
		got  []string
		k    int
		want float64
	}{
		{"exact", []string{"a", "b", "c"}, 3, 1},
		{"tie taken the other way", []string{"a", "b", "c2"}, 3, 1},
		{"one far row", []string{"a", "b", "d"}, 3, 2.0 / 3},
		{"an id the owner has not", []string{"a", "b", "zz"}, 3, 2.0 / 3},
		{"order does not matter", []string{"c", "a", "b"}, 3, 1},
		{"more results than k count at most k", []string{"a", "b", "c", "c2"}, 3, 1},
		{"nothing", nil, 2, 0},
	}
	for _, tc := range cases {
		if got := exactRecall(q, rows, tc.got, tc.k); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: recall %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := exactRecall(q, rows[:2], []string{"b", "a"}, 10); got != 1 {
		t.Errorf("owner of 2 rows, both returned: recall %v, want 1", got)
	}
	if got := exactRecall(q, nil, nil, 10); got != 1 {
		t.Errorf("owner with no rows: recall %v, want 1", got)
	}
}

// TestRandomUnitVector: the random client vectors have the runtime's
// dimensions, unit length (a direction the API accepts), and come from the
// seed alone.
func TestRandomUnitVector(t *testing.T) {
	a := randomUnitVector(rand.New(rand.NewPCG(1, 2)))
	b := randomUnitVector(rand.New(rand.NewPCG(1, 2)))
	if len(a) != benchDims {
		t.Fatalf("%d dimensions, want %d", len(a), benchDims)
	}
	var norm float64
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("dimension %d differs for the same seed: %v vs %v", i, a[i], b[i])
		}
		norm += float64(a[i]) * float64(a[i])
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("squared norm %v, want 1", norm)
	}
}

// TestClientVectorItemWireShape: the item carries `embedding` only when
// the client embedded it, in the shape the API's add request reads.
func TestClientVectorItemWireShape(t *testing.T) {
	it := newCorpus().stored("owner-0000", 1)
	plain, err := json.Marshal(clientVectorItem{item: it})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "embedding") {
		t.Errorf("an item without a vector sends %s", plain)
	}
	withVec, err := json.Marshal(clientVectorItem{item: it, Embedding: []float32{0.5, -0.25}})
	if err != nil {
		t.Fatal(err)
	}
	var req memory.AddRequest
	dec := json.NewDecoder(strings.NewReader(string(withVec)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		t.Fatalf("%s: %v", withVec, err)
	}
	if req.Content != it.Content || len(req.Embedding) != 2 || req.Embedding[1] != -0.25 {
		t.Errorf("decoded %+v from %s", req, withVec)
	}
}

// TestClientVectorTargets: a client-vector search that is not exact fails
// the run; a client vector that costs more CPU per search is reported only,
// and adds have no CPU target.
func TestClientVectorTargets(t *testing.T) {
	c := &ClientVectorsReport{
		Recall: []ClientVectorRecall{{Vectors: "a", Queries: 10, Recall: 1, Min: 1}, {Vectors: "b", Queries: 10, Recall: 0.95, Min: 0.5}},
		Rows: []ClientVectorRow{
			{Name: "vector search", CPU: 0.9}, {Name: "hybrid search", CPU: 1.2}, {Name: "add (dedup)", CPU: 2}, {Name: "add (dedup), dense vector", CPU: 2},
		},
	}
	ts := clientVectorTargets(c)
	if len(ts) != 4 {
		t.Fatalf("%d targets %+v, want 4 (two recall checks, two search CPU targets)", len(ts), ts)
	}
	if !ts[0].Check || !ts[0].Met || !ts[1].Check || ts[1].Met {
		t.Errorf("recall targets %+v %+v: want checks, the first met, the second missed", ts[0], ts[1])
	}
	if ts[2].Check || !ts[2].Met || ts[3].Check || ts[3].Met || ts[3].Gap != 0.2 {
		t.Errorf("CPU targets %+v %+v: want reported only, 0.9 met, 1.2 missed by 0.2", ts[2], ts[3])
	}
	empty := clientVectorTargets(&ClientVectorsReport{Recall: []ClientVectorRecall{{Vectors: "a"}}})
	if len(empty) != 1 || empty[0].Met {
		t.Errorf("recall over 0 queries %+v: want a missed check", empty)
	}
}

// TestCVSearchBody: the service-embedded side sends the text only; a client
// side sends its vector, and the text only where hybrid's full-text part
// needs it; the dense side sends the dense vector.
func TestCVSearchBody(t *testing.T) {
	q := cvQuery{owner: "o", text: "words", vec: []float32{1, 0}, dense: []float32{0.6, 0.8}}
	cases := []struct {
		mode    string
		vectors cvVectors
		query   bool
		vec     []float32
	}{
		{"vector", cvServer, true, nil},
		{"vector", cvSparse, false, q.vec},
		{"vector", cvDense, false, q.dense},
		{"hybrid", cvServer, true, nil},
		{"hybrid", cvSparse, true, q.vec},
	}
	for _, tc := range cases {
		b := cvSearchBody(q, tc.mode, tc.vectors)
		_, hasQuery := b["query"]
		v, _ := b["vector"].([]float32)
		if b["mode"] != tc.mode || b["topK"] != topK || hasQuery != tc.query || len(v) != len(tc.vec) || (v != nil && &v[0] != &tc.vec[0]) {
			t.Errorf("%s/%d: body %v", tc.mode, tc.vectors, b)
		}
	}
	if n := jsonBytes(cvSearchBody(q, "vector", cvDense)); n != len(`{"mode":"vector","topK":10,"vector":[0.6,0.8]}`) {
		t.Errorf("jsonBytes of the dense body: %d", n)
	}
}
