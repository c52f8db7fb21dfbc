package demo

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestFakeEmbedderModels: the fake wants its key; under one model texts
// keep the builtin embedder's similarities; two models' vectors of one
// text are unrelated (as two real models' are); the counts follow.
func TestFakeEmbedderModels(t *testing.T) {
	f, err := StartFakeEmbedder("k1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	texts := []string{"Alice prefers dark mode in every editor", "which editor theme does alice like"}
	if code, _ := fakeEmbed(t, f.Server.URL, "wrong", "m", texts); code != http.StatusUnauthorized {
		t.Fatalf("a wrong key: status %d, want 401", code)
	}
	_, a := fakeEmbed(t, f.Server.URL, "k1", DemoModelA, texts)
	_, b := fakeEmbed(t, f.Server.URL, "k1", DemoModelB, texts)
	builtin, err := memory.NewBuiltinEmbedder(FakeEmbedderDims)
	if err != nil {
		t.Fatal(err)
	}
	want, err := builtin.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][][]float32{a, b} {
		if len(m) != 2 || len(m[0]) != FakeEmbedderDims {
			t.Fatalf("got %d vectors of %d dimensions, want 2 of %d", len(m), len(m[0]), FakeEmbedderDims)
		}
		if got, w := cosine(m[0], m[1]), cosine(want[0], want[1]); math.Abs(got-w) > 1e-5 || w < 0.2 {
			t.Errorf("cosine of the two texts under one model %.4f, want the builtin's %.4f (> 0.2)", got, w)
		}
	}
	if c := cosine(a[0], b[0]); math.Abs(c) > 0.3 {
		t.Errorf("one text under models A and B: cosine %.3f, want unrelated vectors (|cos| <= 0.3)", c)
	}
	if cosine(a[0], want[0]) > 0.3 {
		t.Errorf("model A's vector is close to the builtin's: the demo's model change would change nothing")
	}
	if f.Texts(DemoModelA) != 2 || f.Texts("m") != 0 {
		t.Errorf("counts: %d texts with A, %d with the refused model, want 2 and 0", f.Texts(DemoModelA), f.Texts("m"))
	}
	if n, err := fakeTexts(t.Context(), f.Server, DemoModelB); err != nil || n != 2 {
		t.Errorf("counts over HTTP: %d, %v, want 2", n, err)
	}
}

func fakeEmbed(t *testing.T, base, key, model string, texts []string) (int, [][]float32) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "input": texts})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/embeddings", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
	}
	vecs := make([][]float32, len(out.Data))
	for _, d := range out.Data {
		vecs[d.Index] = d.Embedding
	}
	return resp.StatusCode, vecs
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}
