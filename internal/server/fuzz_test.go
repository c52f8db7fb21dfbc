package server

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The seed corpora are in testdata/fuzz/<FuzzName>/; plain go test runs
// them, make fuzz explores from them.

// requestBodies are the JSON bodies of the API, by the fuzzer's choice.
var requestBodies = []func() any{
	func() any { return &addBody{} }, func() any { return &batchBody{} }, func() any { return &extractBody{} },
	func() any { return &updateBody{} }, func() any { return &supersedeBody{} }, func() any { return &searchBody{} },
	func() any { return &contextBody{} }, func() any { return &mintBody{} },
}

// checkProblem fails unless p is a 400 malformed-request or a 422
// validation problem that says what is wrong (and, for 422, where).
func checkProblem(t *testing.T, body []byte, p *Problem) {
	t.Helper()
	switch {
	case p.Status == 400 && p.Type == ProblemBase+probMalformed.slug && len(p.Errors) == 0:
	case p.Status == 422 && p.Type == ProblemBase+probValidation.slug && len(p.Errors) > 0:
		for _, fe := range p.Errors {
			if fe.Field == "" || fe.Message == "" {
				t.Fatalf("body %q: field error %+v without field or message", body, fe)
			}
		}
	default:
		t.Fatalf("body %q: problem %+v is neither 400 malformed nor 422 validation", body, p)
	}
	if p.Detail == "" || p.Title == "" {
		t.Fatalf("body %q: problem %+v without title or detail", body, p)
	}
	if !utf8.ValidString(p.Detail) {
		t.Fatalf("body %q: detail %q is not valid UTF-8", body, p.Detail)
	}
}

// FuzzDecodeBody: every request body is answered 400 (not one JSON
// document in UTF-8) or 422 (naming the field), or decodes into a value
// that re-encodes and decodes to itself; a decoded object with one unknown
// field more is refused naming that field (strictness cannot be dodged).
func FuzzDecodeBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		newBody := requestBodies[int(kind)%len(requestBodies)]
		v := newBody()
		p := decodeStrict(body, v, "")
		if p != nil {
			checkProblem(t, body, p)
			if !utf8.Valid(body) && p.Status != 400 {
				t.Fatalf("invalid UTF-8 %q answered %d", body, p.Status)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("invalid UTF-8 %q was decoded", body)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		w := newBody()
		if p := decodeStrict(again, w, ""); p != nil {
			t.Fatalf("body %q decodes, but its re-encoding %s does not: %+v", body, again, p)
		}
		if twice, _ := json.Marshal(w); !bytes.Equal(twice, again) {
			t.Fatalf("round trip changed %s into %s", again, twice)
		}
		trimmed := bytes.TrimSpace(body)
		extra := append([]byte(`{"zzUnknown":1,`), trimmed[1:]...)
		if bytes.Equal(bytes.TrimSpace(trimmed[1:]), []byte("}")) {
			extra = []byte(`{"zzUnknown":1}`)
		}
		p = decodeStrict(extra, newBody(), "")
		if p == nil || p.Status != 422 || !hasField(*p, "zzUnknown") {
			t.Fatalf("%s with an unknown field was answered %+v", extra, p)
		}
	})
}

// FuzzQuery: a query string is either refused with a 422 naming each bad
// parameter, or every parameter in it is known, given once and valid
// UTF-8, and reading it as the list route does adds no surprise.
func FuzzQuery(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		q := newQuery(&url.URL{RawQuery: raw}, listParams.names()...) // the list route's
		include := q.set("include", listIncludes...)
		_ = q.boolean("includeInactive")
		_ = q.integer("limit")
		p := q.problem()
		if p != nil {
			checkProblem(t, []byte(raw), p)
			if p.Status != 422 {
				t.Fatalf("query %q answered %d", raw, p.Status)
			}
			return
		}
		for k, vs := range q.values {
			if !slices.Contains(listParams.names(), k) || len(vs) != 1 || !utf8.ValidString(vs[0]) {
				t.Fatalf("query %q accepted %q=%q", raw, k, vs)
			}
		}
		for v := range include {
			if !slices.Contains(listIncludes, v) {
				t.Fatalf("query %q accepted include=%q", raw, v)
			}
		}
	})
}

// FuzzBearer: the token of an Authorization header is what follows
// "Bearer " (any case), without surrounding space; any other scheme gives
// no token at all, so it can never match one.
func FuzzBearer(f *testing.F) {
	f.Fuzz(func(t *testing.T, header string) {
		tok := bearer(header)
		if tok != strings.TrimSpace(tok) {
			t.Fatalf("bearer(%q) = %q keeps spaces", header, tok)
		}
		scheme, rest, ok := strings.Cut(header, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			if tok != "" {
				t.Fatalf("bearer(%q) = %q from scheme %q", header, tok, scheme)
			}
			return
		}
		if tok != strings.TrimSpace(rest) {
			t.Fatalf("bearer(%q) = %q, want %q", header, tok, strings.TrimSpace(rest))
		}
	})
}
