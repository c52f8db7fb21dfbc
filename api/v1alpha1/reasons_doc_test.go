package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestReasonsDocumented: every condition type and reason constant of this
// package is in docs/crds.md (in backquotes), so a new reason cannot ship
// without the line that tells users what it means and what to do.
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/crds.md")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(node ast.Node) bool {
			spec, ok := node.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Reason") && !strings.HasPrefix(name.Name, "Condition") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				value, _ := strconv.Unquote(lit.Value)
				n++
				if !strings.Contains(string(doc), "`"+value+"`") {
					t.Errorf("%s (%q) is not documented in docs/crds.md", name.Name, value)
				}
			}
			return true
		})
	}
	if n < 30 {
		t.Errorf("found only %d condition types and reasons: the parser missed them", n)
	}
}
