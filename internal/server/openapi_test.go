package server

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const openAPIURL = "mem://engram/openapi.json"

// openAPIDoc is the parsed document with a JSON Schema 2020-12 compiler
// that knows it, so every response schema (and the component schemas they
// reference) can be compiled and used to validate real responses.
type openAPIDoc struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
	inline   int
	paths    []pathTemplate
}

type pathTemplate struct {
	template string
	re       *regexp.Regexp
	params   int
}

var (
	docOnce   sync.Once
	docParsed *openAPIDoc
	docErr    error
)

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	docOnce.Do(func() { docParsed, docErr = parseOpenAPI(OpenAPIJSON) })
	if docErr != nil {
		t.Fatalf("OpenAPI document: %v", docErr)
	}
	return docParsed
}

func parseOpenAPI(js []byte) (*openAPIDoc, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not an object")
	}
	if doc["openapi"] != "3.1.0" {
		return nil, fmt.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, doc); err != nil {
		return nil, err
	}
	d := &openAPIDoc{doc: doc, compiler: c, schemas: map[string]*jsonschema.Schema{}}
	for p := range doc["paths"].(map[string]any) {
		params := strings.Count(p, "{")
		// QuoteMeta escapes the braces of {param}; replace them escaped.
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$")
		d.paths = append(d.paths, pathTemplate{template: p, re: re, params: params})
	}
	// Literal segments win over parameters, as in ServeMux.
	sort.Slice(d.paths, func(i, j int) bool { return d.paths[i].params < d.paths[j].params })
	return d, nil
}

// operation finds the operation of a concrete request.
func (d *openAPIDoc) operation(method, path string) (template string, op map[string]any) {
	for _, p := range d.paths {
		if !p.re.MatchString(path) {
			continue
		}
		item := d.doc["paths"].(map[string]any)[p.template].(map[string]any)
		if o, ok := item[strings.ToLower(method)].(map[string]any); ok {
			return p.template, o
		}
	}
	return "", nil
}

// resolve follows a local $ref ("#/components/responses/X").
func (d *openAPIDoc) resolve(v map[string]any) (map[string]any, string) {
	ref, ok := v["$ref"].(string)
	if !ok {
		return v, ""
	}
	var cur any = d.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = cur.(map[string]any)[tok]
	}
	return cur.(map[string]any), ref
}

// schema compiles the schema object s: by its $ref when it is one, else as
// a resource of its own (inline schemas in the document hold no $ref).
func (d *openAPIDoc) schema(s map[string]any) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// A reference is compiled by its location and cached by it; an inline
	// schema becomes a resource of its own, cached by its text.
	key, loc := fmt.Sprint(s), ""
	if ref, ok := s["$ref"].(string); ok && len(s) == 1 {
		key, loc = openAPIURL+ref, openAPIURL+ref
	}
	if sch, ok := d.schemas[key]; ok {
		return sch, nil
	}
	if loc == "" {
		d.inline++
		loc = fmt.Sprintf("mem://engram/inline-%d.json", d.inline)
		if err := d.compiler.AddResource(loc, s); err != nil {
			return nil, err
		}
	}
	sch, err := d.compiler.Compile(loc)
	if err != nil {
		return nil, err
	}
	d.schemas[key] = sch
	return sch, nil
}

// checkAgainstOpenAPI fails t when a response is not what the document
// says (see openAPIProblems).
func checkAgainstOpenAPI(t *testing.T, method, path string, r *response) {
	t.Helper()
	for _, p := range openAPIProblems(loadOpenAPI(t), method, path, r) {
		t.Error(p)
	}
}

// openAPIProblems lists how a response differs from the document: an
// undocumented status, another content type, or a body that does not
// validate against the schema. Requests that match no route must get a
// 401/404/405/422 problem.
func openAPIProblems(d *openAPIDoc, method, path string, r *response) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	template, op := d.operation(method, path)
	if op == nil {
		where := method + " " + path + " (no documented operation)"
		if r.status != 404 && r.status != 405 && r.status != 401 && r.status != 422 {
			bad("%s: got %d, want a 401/404/405/422 problem", where, r.status)
		}
		if r.header.Get("Content-Type") != "application/problem+json" {
			bad("%s: answered %q, want application/problem+json", where, r.header.Get("Content-Type"))
		}
		return append(out, bodyProblems(d, map[string]any{"$ref": "#/components/schemas/Problem"}, r.body, where)...)
	}
	where := fmt.Sprintf("%s %s (%s) -> %d", method, path, template, r.status)
	responses := op["responses"].(map[string]any)
	spec, ok := responses[fmt.Sprint(r.status)].(map[string]any)
	if !ok {
		bad("%s: status not documented (documented: %v); body %s", where, keys(responses), r.body)
		return out
	}
	spec, _ = d.resolve(spec)
	content, _ := spec["content"].(map[string]any)
	if len(content) == 0 {
		if method != "HEAD" && len(r.body) != 0 {
			bad("%s: documented without a body, got %s", where, r.body)
		}
		return out
	}
	mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil {
		bad("%s: bad Content-Type %q", where, r.header.Get("Content-Type"))
		return out
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		bad("%s: Content-Type %s not documented (documented: %v)", where, mt, keys(content))
		return out
	}
	if mt != "application/json" && mt != "application/problem+json" {
		return out
	}
	return append(out, bodyProblems(d, media["schema"].(map[string]any), r.body, where)...)
}

func bodyProblems(d *openAPIDoc, schema map[string]any, body []byte, where string) []string {
	sch, err := d.schema(schema)
	if err != nil {
		return []string{fmt.Sprintf("%s: compiling schema %v: %v", where, schema, err)}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return []string{fmt.Sprintf("%s: body is not JSON: %v: %s", where, err, body)}
	}
	if err := sch.Validate(v); err != nil {
		return []string{fmt.Sprintf("%s: body does not match the OpenAPI schema: %v\nbody: %s", where, err, body)}
	}
	return nil
}

// TestOpenAPIValidatorCatchesDrift proves the response check is not a
// no-op: responses that differ from the document in each way are reported.
func TestOpenAPIValidatorCatchesDrift(t *testing.T) {
	d := loadOpenAPI(t)
	jsonHdr := http.Header{"Content-Type": {"application/json"}}
	probHdr := http.Header{"Content-Type": {"application/problem+json"}}
	mem := `{"id":"0b6c2f1e-8d1a-4c3e-9f57-2a9d0c4b7e11","owner":"a","source":"agent","category":"c","content":"x","importance":5,"active":true,"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z","accessCount":0}`
	path := "/v1/owners/a/memories/0b6c2f1e-8d1a-4c3e-9f57-2a9d0c4b7e11"
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		r       response
		wantErr string
	}{
		{"valid memory", "GET", path, response{status: 200, header: jsonHdr, body: []byte(mem)}, ""},
		{"missing required field", "GET", path, response{status: 200, header: jsonHdr, body: []byte(strings.Replace(mem, `"owner":"a",`, "", 1))}, "owner"},
		{"undocumented field", "GET", path, response{status: 200, header: jsonHdr, body: []byte(strings.Replace(mem, `{`, `{"secret":1,`, 1))}, "secret"},
		{"wrong type", "GET", path, response{status: 200, header: jsonHdr, body: []byte(strings.Replace(mem, `"importance":5`, `"importance":"5"`, 1))}, "importance"},
		{"bad date-time", "GET", path, response{status: 200, header: jsonHdr, body: []byte(strings.Replace(mem, `"2026-01-01T00:00:00Z","updatedAt"`, `"yesterday","updatedAt"`, 1))}, "date-time"},
		{"undocumented status", "GET", path, response{status: 418, header: jsonHdr, body: []byte(`{}`)}, "not documented"},
		{"wrong content type", "GET", path, response{status: 200, header: http.Header{"Content-Type": {"text/html"}}, body: []byte(`<p>`)}, "text/html"},
		{"problem without status", "GET", path, response{status: 404, header: probHdr, body: []byte(`{"type":"https://engram.dev/problems/not-found","title":"x"}`)}, "status"},
		{"204 with a body", "DELETE", path, response{status: 204, body: []byte(`x`)}, "without a body"},
		{"unknown route answered 200", "GET", "/v2/whatever", response{status: 200, header: jsonHdr, body: []byte(`{}`)}, "want a 401/404/405/422"},
	} {
		got := strings.Join(openAPIProblems(d, tc.method, tc.path, &tc.r), "\n")
		if tc.wantErr == "" && got != "" {
			t.Errorf("%s: unexpected problems: %s", tc.name, got)
		}
		if tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
			t.Errorf("%s: problems %q do not mention %q", tc.name, got, tc.wantErr)
		}
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIMatchesRoutes walks the router's patterns and the document's
// paths and methods and fails on any difference, and compiles every schema
// of the document (the compiler checks them against the 2020-12 metaschema).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	d := loadOpenAPI(t)
	s := New(Deps{Metrics: NewMetrics(), Tokens: &Tokens{}})
	routes := s.Routes()

	var documented []string
	for p, item := range d.doc["paths"].(map[string]any) {
		for m := range item.(map[string]any) {
			switch m {
			case "get", "post", "put", "patch", "delete", "head", "options", "trace":
				documented = append(documented, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(documented)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %q is served but not in openapi.yaml", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(routes, r) {
			t.Errorf("operation %q is in openapi.yaml but not served", r)
		}
	}
	if len(routes) != 46 { // GET /metrics is on the metrics listener, not a route
		t.Errorf("%d routes, want 46: %v", len(routes), routes)
	}

	for name, sch := range d.doc["components"].(map[string]any)["schemas"].(map[string]any) {
		if _, err := d.compiler.Compile(openAPIURL + "#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s does not compile: %v (%v)", name, err, sch)
		}
	}
	// Every operation of the API space declares the bearer scheme (global),
	// every open one opts out explicitly.
	for _, open := range []string{"/openapi.json", "/healthz", "/readyz"} {
		op := d.doc["paths"].(map[string]any)[open].(map[string]any)["get"].(map[string]any)
		if sec, ok := op["security"].([]any); !ok || len(sec) != 0 {
			t.Errorf("%s must declare security: [] (it is served without a token)", open)
		}
	}
}

// TestProblemTypesDocumented keeps docs/api.md's table of problem types in
// step with the code.
func TestProblemTypesDocumented(t *testing.T) {
	apiDoc := readRepoFile(t, "docs/api.md")
	for _, k := range allProblemKinds {
		if !strings.Contains(apiDoc, ProblemBase+k.slug) {
			t.Errorf("docs/api.md does not list the problem type %s%s", ProblemBase, k.slug)
		}
	}
}
