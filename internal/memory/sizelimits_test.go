package memory

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Size limits of the engine (issue 28): a file a reader can hold in mind,
// and no type so wide that its methods say nothing about what it is.
const (
	maxFileLines   = 450
	maxTypeMethods = 60
)

// TestEngineSizeLimits: no Go file of internal/memory or its packages
// (tests included) is over maxFileLines lines, and no type declares more
// than maxTypeMethods methods.
func TestEngineSizeLimits(t *testing.T) {
	methods := map[string]int{} // [package dir.]type -> methods declared
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines && !ast.IsGenerated(f) {
			t.Errorf("%s has %d lines; at most %d", path, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil {
				typ := receiverType(fn.Recv.List[0].Type)
				if dir := filepath.Dir(path); dir != "." {
					typ = dir + "." + typ
				}
				methods[typ]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d files read", files)
	}
	for typ, n := range methods {
		if n > maxTypeMethods {
			t.Errorf("%s declares %d methods; at most %d", typ, n, maxTypeMethods)
		}
	}
}

// receiverType is the name of a receiver's type: T for T, *T, T[P] or *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
