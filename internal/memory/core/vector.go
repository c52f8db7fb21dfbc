package core

import (
	"github.com/engram-dev/engram/internal/memory/modelapi"
)

// Vector checks a vector a client sent in place of an embedding (add's
// embedding, search's vector): exactly the runtime's dimensions and a
// direction pgvector can compare (VectorDirection). nil is "not given" and
// passes.
func (f *FieldErrors) Vector(field string, v []float32, dims int) {
	if v == nil {
		return
	}
	if len(v) != dims {
		f.Add(field, "has %d dimensions, the runtime's embeddings have %d", len(v), dims)
		return
	}
	if msg := VectorDirection(v); msg != "" {
		f.Add(field, "%s", msg)
	}
}

// VectorDirection says why v has no direction pgvector can compare, or ""
// when it has one (modelapi.VectorDirection: the embedder's answers are
// held to the same rule).
func VectorDirection(v []float32) string { return modelapi.VectorDirection(v) }
