package server

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestQueryParamsMatchOpenAPI: the route table is the one source of each
// route's query parameters and their descriptions (routes_params.go); for
// every REST operation, openapi.yaml documents exactly those parameters,
// in that order, with the same descriptions, and a route that declares
// none documents none.
func TestQueryParamsMatchOpenAPI(t *testing.T) {
	s := New(Deps{})
	d := loadOpenAPI(t)
	paths := d.doc["paths"].(map[string]any)
	if len(s.operations) == 0 {
		t.Fatal("no operations registered")
	}
	for _, rt := range s.operations {
		method, path, _ := strings.Cut(rt.pattern, " ")
		item, _ := paths[path].(map[string]any)
		op, _ := item[strings.ToLower(method)].(map[string]any)
		if op == nil {
			t.Errorf("%s: not in openapi.yaml", rt.pattern)
			continue
		}
		documented := documentedQuery(d, item, op)
		declared := make([]string, len(rt.query))
		for i, p := range rt.query {
			declared[i] = fmt.Sprintf("%s: %s", p.name, p.desc)
		}
		if !slices.Equal(documented, declared) {
			t.Errorf("%s: openapi.yaml documents the query parameters\n\t%s\nthe route declares\n\t%s", rt.pattern,
				strings.Join(documented, "\n\t"), strings.Join(declared, "\n\t"))
		}
	}
}

// documentedQuery lists "name: description" of the query parameters of an
// operation (the path item's first, then the operation's).
func documentedQuery(d *openAPIDoc, item, op map[string]any) []string {
	var out []string
	for _, list := range []any{item["parameters"], op["parameters"]} {
		ps, _ := list.([]any)
		for _, p := range ps {
			p, _ := d.resolve(p.(map[string]any))
			if p["in"] == "query" {
				out = append(out, fmt.Sprintf("%s: %s", p["name"], p["description"]))
			}
		}
	}
	return out
}

// TestBodyFieldsMatchOpenAPI: the body type an operation is registered
// with and the request schema of openapi.yaml name the same fields; a
// route that reads no body documents none, and an optional body is not
// required in the document.
func TestBodyFieldsMatchOpenAPI(t *testing.T) {
	s := New(Deps{})
	d := loadOpenAPI(t)
	paths := d.doc["paths"].(map[string]any)
	for _, rt := range s.operations {
		method, path, _ := strings.Cut(rt.pattern, " ")
		op, _ := paths[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
		rb, _ := op["requestBody"].(map[string]any)
		switch {
		case rt.rawBody != "":
			content, _ := rb["content"].(map[string]any)
			if _, ok := content[rt.rawBody]; !ok {
				t.Errorf("%s: reads a %s body, openapi.yaml documents %v", rt.pattern, rt.rawBody, rb)
			}
		case rt.body == nil && rb != nil:
			t.Errorf("%s: documents a request body, the route reads none", rt.pattern)
		case rt.body != nil && rb == nil:
			t.Errorf("%s: reads a %s body, openapi.yaml documents none", rt.pattern, rt.body)
		case rt.body != nil:
			if required, _ := rb["required"].(bool); required == rt.optionalBody {
				t.Errorf("%s: requestBody.required = %v, the route's body is optional: %v", rt.pattern, required, rt.optionalBody)
			}
			schema, _ := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			schema, _ = d.resolve(schema)
			props, _ := schema["properties"].(map[string]any)
			if got, want := slices.Sorted(maps.Keys(props)), jsonFields(rt.body); !slices.Equal(got, want) {
				t.Errorf("%s: openapi.yaml documents the body fields %v, %s has %v", rt.pattern, got, rt.body, want)
			}
		}
	}
}

// jsonFields lists the JSON names of a struct's fields, sorted.
func jsonFields(typ reflect.Type) []string {
	out := []string{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, cmp.Or(name, f.Name))
	}
	slices.Sort(out)
	return out
}
