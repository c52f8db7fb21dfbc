package core

import (
	"math"
	"strconv"
	"strings"
)

// Numbers of metadata and filters are JSON numbers that PostgreSQL's jsonb
// keeps as numeric and prints in full, never with an exponent: 1e40 is
// read back as 41 digits and 1e-16383 as 16,385 characters. So the size
// a number counts for is the size it is stored and read back at, not the
// size it was sent at (issue 26, seventeenth review, HIGH 1: 3.6 KB of
// metadata sent, 6.4 MB read back).

// maxNumberExponent bounds the exponent read before sizing a number:
// beyond it the stored form is larger than any limit anyway.
const maxNumberExponent = 1 << 20

// NumberStoredBytes is an upper bound of the bytes PostgreSQL prints for
// the JSON number lit: the sign, the digits of the whole part and, when
// the value has a scale, the point and that many digits.
func NumberStoredBytes(lit string) int {
	digits := strings.TrimPrefix(lit, "-")
	n := len(lit) - len(digits)
	mantissa, expText, hasExp := strings.Cut(strings.ToLower(digits), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || e > maxNumberExponent || e < -maxNumberExponent {
			return math.MaxInt32
		}
		exp = e
	}
	whole, frac, _ := strings.Cut(mantissa, ".")
	n += max(1, len(whole)+exp)
	if scale := len(frac) - exp; scale > 0 {
		n += 1 + scale
	}
	return n
}

// NumberProblem says why the JSON number lit cannot be held or compared
// as a float64 (beyond its range, or so close to zero that it reads as
// zero though it is not), or "" when it can.
func NumberProblem(lit string) string {
	f, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil || math.IsInf(f, 0):
		return "is beyond the range of a float64"
	case f == 0 && strings.ContainsAny(mantissaOf(lit), "123456789"):
		return "is too close to zero for a float64 (it would read as 0)"
	}
	return ""
}

// mantissaOf is lit without its exponent.
func mantissaOf(lit string) string {
	m, _, _ := strings.Cut(strings.ToLower(lit), "e")
	return m
}
