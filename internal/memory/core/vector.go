package core

import "math"

// Vector checks a vector a client sent in place of an embedding (add's
// embedding, search's vector): exactly the runtime's dimensions, every
// value finite, not all zeros (the cosine distance of a zero vector is
// undefined: it would rank as NaN). nil is "not given" and passes.
func (f *FieldErrors) Vector(field string, v []float32, dims int) {
	if v == nil {
		return
	}
	if len(v) != dims {
		f.Add(field, "has %d dimensions, the runtime's embeddings have %d", len(v), dims)
		return
	}
	zero := true
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			f.Add(field, "value %d is not a finite number", i)
			return
		}
		zero = zero && x == 0
	}
	if zero {
		f.Add(field, "must not be all zeros: cosine similarity is undefined for it")
	}
}
