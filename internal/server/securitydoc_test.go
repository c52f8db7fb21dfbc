package server

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestSecurityDocNamesRealTests: every test docs/security.md cites for a
// bound or a guarantee exists — a top-level Test function of some package,
// or an envtest scenario `TestOperator/<Name>` of internal/controller — so a
// renamed or deleted test cannot leave a bound documented as tested.
func TestSecurityDocNamesRealTests(t *testing.T) {
	doc := readRepoFile(t, "docs/security.md")
	funcs, scenarios := repoTests(t)
	cited := regexp.MustCompile("`[^`]*`").FindAllString(doc, -1)
	names := regexp.MustCompile(`\bTest[A-Z]\w*(/\w+)?`)
	checked := 0
	for _, span := range cited {
		for _, name := range names.FindAllString(span, -1) {
			checked++
			top, sub, _ := strings.Cut(name, "/")
			switch {
			case sub != "" && top == "TestOperator":
				if !slices.Contains(scenarios, sub) {
					t.Errorf("docs/security.md cites %s: no scenario %q in TestOperator", name, sub)
				}
			case !slices.Contains(funcs, top):
				t.Errorf("docs/security.md cites %s: no func %s in any test file", name, top)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("found %d test names in docs/security.md; the pattern is broken", checked)
	}
}

// repoTests lists the Test functions of every _test.go file of the
// repository and the scenario names TestOperator runs.
func repoTests(t *testing.T) (funcs, scenarios []string) {
	t.Helper()
	root := testenv.RepoRoot()
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	// Scenarios are the entries of operatorScenarios ({name: "X", run:
	// scenarioX}) and the idle check TestOperator runs last.
	run := regexp.MustCompile(`\{name: "(\w+)", run: scenario\w+|t\.Run\("(\w+)", func\(t \*testing\.T\) \{ scenario\w+`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			funcs = append(funcs, m[1])
		}
		for _, m := range run.FindAllStringSubmatch(string(b), -1) {
			scenarios = append(scenarios, m[1]+m[2])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs, scenarios
}
