package write

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOneWritePath pins the core write API: every memory written from a
// prepared add — by Add, AddBatch, Extract or ExtractSession — is decided
// (insert, merge, arbitration, noop) by decide, and decide is called from
// one function only, the one that opens the owner's transaction
// (WriteInTx, with beginLockedLookup). A second caller would be a second
// copy of the dedup/transaction path to keep in step with the first.
func TestOneWritePath(t *testing.T) {
	callers := map[string][]string{} // callee -> functions calling it
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && !slices.Contains(callers[sel.Sel.Name], fn.Name.Name) {
						callers[sel.Sel.Name] = append(callers[sel.Sel.Name], fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	deciders := callers["decide"]
	if len(deciders) != 1 {
		t.Fatalf("decide is called from %v; want one function, the write path's transaction", deciders)
	}
	if !slices.Contains(callers["beginLockedLookup"], deciders[0]) {
		t.Errorf("decide is called from %s, which does not open the owner's transaction (beginLockedLookup)", deciders[0])
	}
}
