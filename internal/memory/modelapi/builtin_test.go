package modelapi

import (
	"math"
	"slices"
	"testing"
)

// TestBuiltinUnitOfCancelledFeatures (a LOW of issue 26): features that
// cancel out leave a zero vector, which scaled to length 1 was NaN in every
// dimension (PostgreSQL refuses a vector with NaN, so the add failed). The
// builtin embedder returns a unit vector for it.
func TestBuiltinUnitOfCancelledFeatures(t *testing.T) {
	e, err := NewBuiltinEmbedder(64)
	if err != nil {
		t.Fatal(err)
	}
	b := e.(*builtinEmbedder)
	v := make([]float64, 64)
	b.add(v, "alpha", 1)
	b.add(v, "alpha", -1) // cancelled, as colliding features of opposite signs are
	out := b.unit(v, "alpha")
	var norm float64
	for i, x := range out {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("dimension %d is %v", i, x)
		}
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-6 {
		t.Fatalf("the vector of cancelled features has length² %v, want 1", norm)
	}
	if again := b.unit(make([]float64, 64), "alpha"); !slices.Equal(again, out) {
		t.Fatal("the unit vector of a cancelled text is not the same twice")
	}
}
