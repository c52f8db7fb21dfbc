package modelapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestVectorDirection is the rule's table: what pgvector can compare in
// whatever order it adds the squares.
func TestVectorDirection(t *testing.T) {
	unit := make([]float32, 8)
	unit[0] = 1
	// The seventeenth review's vector: the largest float32 whose square is
	// finite, then 255 values whose squares vanish next to it in index
	// order but overflow in pgvector's parallel lanes.
	lanes := make([]float32, 256)
	lanes[0] = float32(math.Sqrt(math.MaxFloat32))
	for i := 1; i < len(lanes); i++ {
		lanes[i] = 3e15
	}
	subnormalMix := []float32{1e-40, 0.5, 0}
	for name, c := range map[string]struct {
		v    []float32
		want string
	}{
		"unit":                   {unit, ""},
		"subnormal beside a one": {subnormalMix, ""},
		"zeros":                  {make([]float32, 8), "all zeros"},
		"negative zero":          {[]float32{float32(math.Copysign(0, -1))}, "all zeros"},
		"vanishing squares":      {[]float32{1e-30, 1e-30}, "all zeros"},
		"subnormal sum":          {[]float32{1e-20}, "too close to zero"},
		"overflowing square":     {[]float32{1e20}, "too long"},
		"overflow in lanes":      {lanes, "too long"},
		"NaN":                    {[]float32{float32(math.NaN()), 1}, "not a finite number"},
	} {
		if got := VectorDirection(c.v); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// TestEmbedderAnswerWithoutDirectionIsTheServersFault (issue 26's
// seventeenth review, MEDIUM 1): an embedding server that answers a text
// with a vector of zeros had it stored, and every search of the owner
// then failed. Now that answer is the server's fault (ErrUpstream, a 502)
// and nothing is stored.
func TestEmbedderAnswerWithoutDirectionIsTheServersFault(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"data": []map[string]any{
			{"index": 0, "embedding": []float32{0.6, 0.8, 0}},
			{"index": 1, "embedding": []float32{0, 0, 0}},
		}})
	}))
	defer srv.Close()
	e, err := NewEmbedder(EmbeddingConfig{Provider: ProviderOpenAI, Endpoint: srv.URL, Model: "m", Dimensions: 3}, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Embed(t.Context(), []string{"a text", "a text the server cannot place"})
	if !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "text 1") {
		t.Fatalf("an answer of zeros: %v, want ErrUpstream naming text 1", err)
	}
}
