package modelapi

import (
	"fmt"
	"math"
)

// smallestNormal32 is the smallest normal float32.
const smallestNormal32 = 0x1p-126

// VectorDirection says why v has no direction pgvector can compare, or ""
// when it has one. pgvector's cosine distance divides by the vectors'
// lengths, whose squares it sums in float32: a vector whose sum underflows
// (all zeros, or values as small as 1e-30), lands among the subnormals, or
// overflows (values near 1e19) gives NaN against every other vector, and
// one such memory made every search of its owner fail (issue 26's
// sixteenth review, HIGH 1).
//
// pgvector may add the squares in any order (in parallel lanes), so the
// rule must hold whatever the order: each square is taken as pgvector
// takes it (in float32, so one under about 1e-23 counts as zero) and
// their sum in float64 must keep a margin of 2x from both ends of
// float32's normal range. All squares are non-negative, so no partial sum
// in any order is larger than the whole, and float32 rounding moves a sum
// of 4096 terms by far less than 2x (issue 26, seventeenth review, LOW).
func VectorDirection(v []float32) string {
	var sum float64
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprintf("value %d is not a finite number", i)
		}
		sum += float64(float32(x * x)) // rounded as pgvector rounds it
	}
	switch {
	case sum == 0:
		return "must not be all zeros (or values so small that their squares are zero in float32): cosine similarity is undefined for it"
	case sum < 2*smallestNormal32:
		return "is too close to zero to have a direction: the sum of its squared values is not clearly above float32's smallest normal number"
	case sum > math.MaxFloat32/2:
		return "is too long: the sum of its squared values comes near float32's largest number; scale it down (only its direction counts)"
	}
	return ""
}
