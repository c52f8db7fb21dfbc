package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bad input is answered in two steps, the same on every route:
//   - 400 malformed-request: the body is not one JSON document in UTF-8
//     (syntax error, truncated, empty, trailing data, invalid UTF-8);
//   - 422 validation: it is JSON but does not fit (unknown field, wrong
//     type, number out of range, invalid value), with errors[] naming fields.
// encoding/json silently replaces invalid UTF-8 with U+FFFD, which would
// store text the client never sent: the body is checked before decoding.

// readBody reads the whole body, bounded by the server's limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Problem) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, newProblem(probMediaType, "send the body as application/json")
		}
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		return nil, tooLarge(s.opts.MaxBodyBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(s.opts.MaxBodyBytes)
		}
		return nil, newProblem(probMalformed, "reading the request body failed")
	}
	return body, nil
}

func tooLarge(limit int64) *Problem {
	return newProblem(probTooLarge, fmt.Sprintf("the request body exceeds %d bytes", limit))
}

// decodeBody reads the body and decodes it strictly into v. optional
// makes an empty body the empty object (POSTs whose input is all optional).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) *Problem {
	body, p := s.readBody(w, r)
	if p != nil {
		return p
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeStrict(body, v, "")
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data. prefix names v in field errors (e.g. "items[3]").
func decodeStrict(body []byte, v any, prefix string) *Problem {
	if !utf8.Valid(body) {
		return newProblem(probMalformed, "the request body is not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return newProblem(probMalformed, "the request body is empty; send a JSON object")
	}
	if trimmed[0] != '{' {
		if json.Valid(trimmed) {
			return validationProblem(fieldErr(orBody(prefix), "must be a JSON object"))
		}
		return newProblem(probMalformed, "the request body is not valid JSON")
	}
	if vc, ok := v.(vectorCarrier); ok && decodeLifted(trimmed, v, vc) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if p, ok := vectorFallback(err, trimmed, v, prefix); ok {
			return p
		}
		return decodeProblem(err, prefix)
	}
	if _, err := dec.Token(); err != io.EOF {
		return newProblem(probMalformed, "the request body has data after the JSON object")
	}
	return nil
}

// decodeProblem turns a json decoding error into 400 or 422.
func decodeProblem(err error, prefix string) *Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return newProblem(probMalformed, fmt.Sprintf("the request body is not valid JSON (at byte %d): %s", syn.Offset, syn.Error()))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return newProblem(probMalformed, "the request body ends in the middle of the JSON document")
	case errors.As(err, &typ):
		field := joinField(prefix, typ.Field)
		return validationProblem(fieldErr(field, typeMessage(typ)))
	}
	// encoding/json reports unknown fields only as text: json: unknown field "x".
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unq, uerr := strconv.Unquote(name); uerr == nil {
			name = unq
		}
		return validationProblem(fieldErr(joinField(prefix, name), unknownFieldMessage(name)))
	}
	var fe *fieldDecodeError
	if errors.As(err, &fe) {
		return validationProblem(fieldErr(joinField(prefix, fe.field), fe.msg))
	}
	return validationProblem(fieldErr(orBody(prefix), err.Error()))
}

// unknownFieldMessage says what to do about an unknown field: where the
// owner goes (a client porting from a body-scoped API puts it in the
// body), and where the fields of a request are listed otherwise.
func unknownFieldMessage(name string) string {
	if name == "owner" {
		return "unknown field: the owner is the {owner} of the path (/v1/owners/{owner}/...), never in a body"
	}
	return "unknown field (the fields of each request are in /openapi.json)"
}

// fieldDecodeError is returned by custom UnmarshalJSON methods of request types.
type fieldDecodeError struct{ field, msg string }

func (e *fieldDecodeError) Error() string { return e.field + ": " + e.msg }

func typeMessage(e *json.UnmarshalTypeError) string {
	want := e.Type.String()
	switch e.Type.Kind().String() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		want = "an integer"
		if strings.HasPrefix(e.Value, "number") {
			return "must be an integer within range, got " + e.Value
		}
	case "float32", "float64":
		want = "a number"
		if strings.HasPrefix(e.Value, "number") {
			// A client vector's value beyond float32 (1e39) lands here.
			return "must be a number within the range of " + e.Type.String() + ", got " + e.Value
		}
	case "string":
		want = "a string"
	case "bool":
		want = "true or false"
	case "slice":
		want = "an array"
	case "struct", "map":
		want = "an object"
	}
	return "must be " + want + ", got " + e.Value
}

func joinField(prefix, field string) string {
	switch {
	case prefix == "":
		return orBody(field)
	case field == "":
		return prefix
	default:
		return prefix + "." + field
	}
}

func orBody(field string) string {
	if field == "" {
		return "body"
	}
	return field
}
