package naming

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Size limits of the whole tree (issue 28): a file a reader can hold in
// mind, and no type so wide that its methods say nothing about what it is.
const (
	maxFileLines   = 450
	maxTypeMethods = 60
)

// skippedDirs are the directories of the module root that hold no source of
// Engram's own: build output, pinned tools, caches and scratch
// (.gitignore), and any hidden directory.
var skippedDirs = map[string]bool{"bin": true, "dist": true, "tmp": true, "vendor": true, "node_modules": true}

// TestTreeSizeLimits: no non-generated Go file of the repository (tests,
// tools, bench and commands included) is over maxFileLines lines, and no
// type declares more than maxTypeMethods methods in its package.
func TestTreeSizeLimits(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module root: %v", root, err)
	}
	methods := map[string]int{} // dir (package) type -> methods declared
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || skippedDirs[d.Name()] && filepath.Dir(path) == root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s has %d lines; at most %d: split it by what it holds", rel, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil {
				methods[filepath.Dir(rel)+" "+f.Name.Name+"."+receiverType(fn.Recv.List[0].Type)]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk reached the whole tree, and counted the methods of the
	// widest type there is (the engine's façade).
	if files < 500 {
		t.Fatalf("only %d Go files read under %s", files, root)
	}
	if n := methods["internal/memory memory.Store"]; n < 30 {
		t.Fatalf("counted %d methods of internal/memory's Store; the walk or the count is wrong", n)
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
