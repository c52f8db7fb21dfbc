package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryRouteIsAnOperation: every route of the API space (/v1) is
// registered with handleOp, so the adapter enforces its contract and writes
// its answer; only /mcp (the SDK's handler) is served otherwise.
func TestEveryRouteIsAnOperation(t *testing.T) {
	s := New(Deps{})
	ops := map[string]bool{}
	for _, rt := range s.operations {
		ops[rt.pattern] = true
	}
	for _, pattern := range s.Routes() {
		_, path, _ := strings.Cut(pattern, " ")
		if strings.HasPrefix(path, "/v1/") && !ops[pattern] {
			t.Errorf("%s is not an operation (register it with handleOp)", pattern)
		}
	}
}

// Limits that keep the package readable: a file holds one idea, a type a
// bounded set of methods (issue 28).
const (
	maxFileLines   = 450
	maxTypeMethods = 60
)

// TestServerFilesAndTypesStaySmall: no Go file of the package (tests
// included) is over maxFileLines lines and no type has more than
// maxTypeMethods methods (*Server included).
func TestServerFilesAndTypesStaySmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	fset := token.NewFileSet()
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it by what it holds", name, n, maxFileLines)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil {
				methods[receiverType(fn.Recv.List[0].Type)]++
			}
		}
	}
	for typ, n := range methods {
		if n > maxTypeMethods {
			t.Errorf("type %s has %d methods, more than %d", typ, n, maxTypeMethods)
		}
	}
}

// receiverType names the type of a receiver (T, *T, T[P]).
func receiverType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverType(x.X)
	case *ast.IndexExpr:
		return receiverType(x.X)
	case *ast.IndexListExpr:
		return receiverType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
