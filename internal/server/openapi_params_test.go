package server

import (
	"fmt"
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
