package naming

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/engram-dev/engram/"

// codeSpan is a Markdown code span: `x`.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// archRow is one row of the package table of docs/architecture.md: a
// package (or, ending in "…", every package under a prefix) and the Engram
// packages it imports, when the row lists them exactly.
type archRow struct {
	pkg     string
	prefix  bool
	imports []string
	exact   bool
}

// archTable reads the rows of the "## Packages" table of doc.
func archTable(t *testing.T, doc string) []archRow {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Packages\n")
	if !ok {
		t.Fatal("docs/architecture.md has no ## Packages section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []archRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) != 3 {
			continue
		}
		names := codeSpan.FindAllStringSubmatch(cells[0], -1)
		if len(names) != 1 {
			t.Errorf("row %q names %d packages; give each package its own row", cells[0], len(names))
			continue
		}
		r := archRow{pkg: names[0][1], exact: !strings.Contains(cells[2], "…")}
		r.pkg, r.prefix = strings.CutSuffix(r.pkg, "…")
		for _, m := range codeSpan.FindAllStringSubmatch(cells[2], -1) {
			r.imports = append(r.imports, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) < 20 {
		t.Fatalf("read only %d rows of the package table", len(rows))
	}
	return rows
}

// TestArchitectureTableMatchesGoList: the package table of
// docs/architecture.md has a row for every package `go list ./...` lists,
// no row for a package that does not exist, and a row that lists its
// imports exactly lists the package's Engram imports (tests excluded).
func TestArchitectureTableMatchesGoList(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := archTable(t, string(doc))
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	listed := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		var imports []string
		for _, imp := range fields[1:] {
			if rel, ours := strings.CutPrefix(imp, module); ours {
				imports = append(imports, rel)
			}
		}
		listed[pkg] = imports
	}
	for pkg, imports := range listed {
		i := slices.IndexFunc(rows, func(r archRow) bool {
			return r.pkg == pkg || r.prefix && strings.HasPrefix(pkg, r.pkg)
		})
		if i < 0 {
			t.Errorf("docs/architecture.md has no row for %s (imports %v)", pkg, imports)
			continue
		}
		if r := rows[i]; !r.prefix && r.exact {
			got, want := slices.Sorted(slices.Values(r.imports)), slices.Sorted(slices.Values(imports))
			if !slices.Equal(got, want) {
				t.Errorf("docs/architecture.md says %s imports %v; go list says %v", pkg, got, want)
			}
		}
	}
	for _, r := range rows {
		found := false
		for pkg := range listed {
			found = found || pkg == r.pkg || r.prefix && strings.HasPrefix(pkg, r.pkg)
		}
		if !found {
			t.Errorf("docs/architecture.md has a row for %s, which go list does not list", r.pkg)
		}
	}
}
