package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"sync"
)

// jsonVector is a client's own vector in a request body (`embedding` on
// add and update, `vector` on search). encoding/json decodes []float32 one
// reflected element at a time, which made a 384-number array cost the
// service more CPU than embedding the text with the builtin embedder
// (issue 31, docs/performance.md "The vector decoder"). decodeStrict
// usually takes the member out of the body before encoding/json sees it
// (decodeLifted); otherwise UnmarshalJSON parses a plain array of numbers
// directly, with strconv.ParseFloat(…, 32) as
// encoding/json does, so the values are bit for bit the same. Anything
// else (null elements, strings, objects, numbers beyond float32) goes to
// encoding/json; when that refuses it, decodeStrict decodes the body again
// with []float32 in place of jsonVector, so the 422 is exactly the one
// encoding/json gives (same field, message and, with several errors in one
// body, the same first one). The OpenAPI document and the MCP tools'
// types do not change: on the wire it is still an array of numbers.
type jsonVector []float32

// UnmarshalJSON decodes a JSON array of numbers. encoding/json calls it
// with one syntactically valid JSON value.
func (v *jsonVector) UnmarshalJSON(data []byte) error {
	if vec, ok := parseNumberArray(data); ok {
		*v = vec
		return nil
	}
	if string(bytes.TrimSpace(data)) == "null" {
		*v = nil // as encoding/json does for a slice
		return nil
	}
	// Into the slice as it is: a member given twice decodes into the first
	// one's array, where a null element keeps the value before it.
	if err := json.Unmarshal(data, (*[]float32)(v)); err != nil {
		return &vectorFallbackError{err: err}
	}
	return nil
}

// vectorFallbackError tells decodeStrict that encoding/json refused a
// vector: it decodes the body again the old way for the exact answer.
type vectorFallbackError struct{ err error }

func (e *vectorFallbackError) Error() string { return e.err.Error() }
func (e *vectorFallbackError) Unwrap() error { return e.err }

// parseNumberArray parses `[n, n, ...]` (JSON whitespace allowed) into
// float32s as encoding/json would; ok is false for anything else (null,
// another type, an element that is not a number, a number out of range),
// which the caller leaves to encoding/json.
func parseNumberArray(data []byte) (vec []float32, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, false
	}
	vec = make([]float32, 0, bytes.Count(data, []byte{','})+1)
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return vec, skipSpace(data, i+1) == len(data)
	}
	for i < len(data) { // each pass consumes a number and what follows it
		start := i
		if i = scanJSONNumber(data, i); i < 0 {
			return nil, false
		}
		f, err := strconv.ParseFloat(string(data[start:i]), 32)
		if err != nil {
			return nil, false
		}
		vec = append(vec, float32(f))
		i = skipSpace(data, i)
		if i >= len(data) {
			return nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return vec, skipSpace(data, i+1) == len(data)
		default:
			return nil, false
		}
	}
	return nil, false
}

// scanJSONNumber returns the end of the number in JSON's grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) that starts at b[i], or
// -1 when none starts there or the next byte could continue it.
func scanJSONNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E' || b[i] == '+' || b[i] == '-' || (b[i] >= '0' && b[i] <= '9')) {
		return -1 // 01, 1.5.2, 1e5e: not one JSON number
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainBodies caches, by body type, the same struct with []float32 in
// place of each jsonVector field (what the body types were before).
var plainBodies sync.Map // reflect.Type -> reflect.Type

// plainBody returns a new value of v's type with []float32 for each
// jsonVector field, or nil when v is not a pointer to such a struct.
func plainBody(v any) any {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	t = t.Elem()
	if plain, ok := plainBodies.Load(t); ok {
		return reflect.New(plain.(reflect.Type)).Interface()
	}
	vecType, floats := reflect.TypeFor[jsonVector](), reflect.TypeFor[[]float32]()
	fields := make([]reflect.StructField, 0, t.NumField())
	changed := false
	for f := range t.Fields() {
		if f.Type == vecType {
			f.Type, changed = floats, true
		}
		f.Index, f.Offset = nil, 0
		fields = append(fields, f)
	}
	if !changed {
		return nil
	}
	plain := reflect.StructOf(fields)
	plainBodies.Store(t, plain)
	return reflect.New(plain).Interface()
}

// vectorFallback answers a body whose jsonVector encoding/json refused:
// the problem of decoding it into the plain twin of v's type.
func vectorFallback(err error, body []byte, v any, prefix string) (*Problem, bool) {
	var fb *vectorFallbackError
	if !errors.As(err, &fb) {
		return nil, false
	}
	if plain := plainBody(v); plain != nil {
		if p := decodeStrict(body, plain, prefix); p != nil {
			return p, true
		}
	}
	return decodeProblem(fb.err, prefix), true
}
