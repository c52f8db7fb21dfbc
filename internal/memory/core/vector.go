package core

import (
	"fmt"
	"math"
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

// smallestNormal32 is the smallest normal float32.
const smallestNormal32 = 0x1p-126

// VectorDirection says why v has no direction pgvector can compare, or ""
// when it has one. pgvector's cosine distance divides by the vectors'
// lengths, whose squares it sums in float32: a vector whose sum underflows
// (all zeros, or values as small as 1e-30), lands among the subnormals, or
// overflows (values near 1e19) gives NaN against every other vector, and
// one such memory made every search of its owner fail (issue 26's
// sixteenth review, HIGH 1). The sum is taken as pgvector takes it, in
// float32, each step rounded.
func VectorDirection(v []float32) string {
	var sum float32
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprintf("value %d is not a finite number", i)
		}
		sum = float32(sum + float32(x*x))
	}
	switch {
	case sum == 0:
		return "must not be all zeros (or values so small that their squares are zero in float32): cosine similarity is undefined for it"
	case sum < smallestNormal32:
		return "is too close to zero to have a direction: the sum of its squared values is below float32's smallest normal number"
	case math.IsInf(float64(sum), 0):
		return "is too long: the sum of its squared values overflows float32; scale it down (only its direction counts)"
	}
	return ""
}
