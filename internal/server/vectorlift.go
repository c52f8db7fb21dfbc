package server

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
)

// Even with jsonVector, encoding/json scans a vector's bytes twice with its
// byte-at-a-time state machine (once to find the end of the document, once
// to hand the array to UnmarshalJSON): two thirds of the decoding of a
// 384-number vector. decodeLifted takes the vector member out of the body
// first (one plain byte loop over the body, the array parsed strictly by
// parseNumberArray), decodes the rest with encoding/json and sets the
// vector. It only answers bodies that decode: anything unusual (a key with
// an escape, the field's name in other letter case or twice, a vector that
// is not a plain array of numbers, data after the object) or any error
// leaves the body to the ordinary path, so every refusal is the one
// encoding/json gives for the whole body.

// vectorCarrier is a request body with a client vector member.
type vectorCarrier interface {
	clientVectorField() (name string, dst *jsonVector)
}

func (b *addBody) clientVectorField() (string, *jsonVector)    { return "embedding", &b.Embedding }
func (b *updateBody) clientVectorField() (string, *jsonVector) { return "embedding", &b.Embedding }
func (b *searchBody) clientVectorField() (string, *jsonVector) { return "vector", &b.Vector }

// decodeLifted decodes a body that carries a client vector; ok is false
// when the ordinary path must decode it (v is then zero again).
func decodeLifted(trimmed []byte, v any, vc vectorCarrier) bool {
	name, dst := vc.clientVectorField()
	if !bytes.Contains(trimmed, []byte(`"`+name+`"`)) {
		return false // no vector (the service embeds): nothing to lift
	}
	rest, vec, ok := liftVector(trimmed, name)
	if !ok {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		reflect.ValueOf(v).Elem().SetZero()
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		reflect.ValueOf(v).Elem().SetZero()
		return false
	}
	*dst = vec
	return true
}

// liftVector finds the one top-level member of body (a JSON object and
// nothing after it) named exactly name, parses its value as a plain array
// of numbers and returns the body without that member.
func liftVector(body []byte, name string) (rest []byte, vec []float32, ok bool) {
	if len(body) == 0 || body[0] != '{' {
		return nil, nil, false
	}
	memberStart, valueStart, valueEnd, sepBefore := -1, -1, -1, -1
	i := skipSpace(body, 1)
	if i < len(body) && body[i] == '}' {
		return nil, nil, false // no members: nothing to lift
	}
	sep := 0 // index of the '{' or ',' before the current member
	for i < len(body) {
		if body[i] != '"' {
			return nil, nil, false
		}
		keyStart := i
		end := bytes.IndexByte(body[i+1:], '"')
		if end < 0 {
			return nil, nil, false
		}
		key := body[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, nil, false // an escaped key: encoding/json decides what it names
		}
		i = skipSpace(body, i+end+2)
		if i >= len(body) || body[i] != ':' {
			return nil, nil, false
		}
		vs := skipSpace(body, i+1)
		ve := skipJSONValue(body, vs)
		if ve < 0 {
			return nil, nil, false
		}
		switch {
		case string(key) == name:
			if memberStart >= 0 {
				return nil, nil, false // twice: encoding/json keeps the last
			}
			memberStart, valueStart, valueEnd, sepBefore = keyStart, vs, ve, sep
		case strings.EqualFold(string(key), name):
			return nil, nil, false // encoding/json matches names in any case
		}
		i = skipSpace(body, ve)
		if i >= len(body) {
			return nil, nil, false
		}
		switch body[i] {
		case ',':
			sep = i
			i = skipSpace(body, i+1)
		case '}':
			if i+1 != len(body) || memberStart < 0 {
				return nil, nil, false
			}
			if vec, ok = parseNumberArray(body[valueStart:valueEnd]); !ok {
				return nil, nil, false
			}
			// Cut the member with the comma after it, or, for the last
			// member, with the comma before it.
			cutFrom, cutTo := memberStart, valueEnd
			if after := skipSpace(body, valueEnd); body[after] == ',' {
				cutTo = after + 1
			} else if body[sepBefore] == ',' {
				cutFrom = sepBefore
			}
			rest = make([]byte, 0, len(body)-(cutTo-cutFrom))
			rest = append(append(rest, body[:cutFrom]...), body[cutTo:]...)
			return rest, vec, true
		default:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// skipJSONValue returns the index just past the JSON value starting at i
// (strings with their escapes, nested arrays and objects, literals), or -1.
// It does not validate: what stays in the body is validated by
// encoding/json, the lifted array by parseNumberArray.
func skipJSONValue(body []byte, i int) int {
	depth := 0
	for i < len(body) {
		switch c := body[i]; c {
		case '"':
			i++
			for i < len(body) && body[i] != '"' {
				if body[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(body) {
				return -1
			}
			i++
		case '[', '{':
			depth++
			i++
		case ']', '}':
			if depth == 0 {
				return i
			}
			depth--
			i++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
		if depth == 0 && i > 0 && (body[i-1] == '"' || body[i-1] == ']' || body[i-1] == '}') {
			return i
		}
	}
	if depth == 0 {
		return i
	}
	return -1
}
