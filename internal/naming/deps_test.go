package naming

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// engineLeaves are the packages of the memory engine that nothing in the
// engine depends back on (docs/architecture.md): they import no Engram
// package at all, so each is tested, and can be read, on its own.
var engineLeaves = []string{"../memory/policy", "../memory/textguard", "../memory/modelapi", "../memory/pg", "../memory/extractive"}

// TestDependencyRule pins the rule of the package doc: naming imports the
// standard library only, so internal/memory (no Kubernetes imports at all,
// docs/architecture.md) and internal/tenant may use it without pulling Kubernetes in;
// and the engine's leaves import nothing of Engram.
func TestDependencyRule(t *testing.T) {
	for _, pkg := range append([]string{".", "../memory", "../tenant"}, engineLeaves...) {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "sigs.k8s.io/") || strings.HasSuffix(d, "/api/v1alpha1") {
				t.Errorf("%s depends on %s", pkg, d)
			}
			if pkg == "." && d != "github.com/engram-dev/engram/internal/naming" {
				t.Errorf("naming imports %s; it may import the standard library only", d)
			}
			if slices.Contains(engineLeaves, pkg) && strings.HasPrefix(d, "github.com/engram-dev/engram/") && d != "github.com/engram-dev/engram/internal"+strings.TrimPrefix(pkg, "..") {
				t.Errorf("%s imports %s; a leaf of the engine imports no Engram package", pkg, d)
			}
		}
	}
}

// engineIdeas are the packages of the memory engine's ideas, each with the
// Engram packages it may import: the core imports only the leaves; the
// ideas import the core (and the leaves), never the façade internal/memory;
// the write path of memories imports no idea (every idea that writes
// memories calls it, so there is one dedup and transaction path);
// conversation memory imports no other idea, and long-term memory only
// the write path (its extraction writes facts through it) and
// conversation memory (its episodes summarize sessions), and the export
// format only the core and the write path, so the façade is where they are
// put together (docs/architecture.md, "Inside
// internal/memory").
var engineIdeas = map[string][]string{
	"../memory/core":         engineLeaves,
	"../memory/write":        append([]string{"../memory/core"}, engineLeaves...),
	"../memory/conversation": append([]string{"../memory/core"}, engineLeaves...),
	"../memory/longterm":     append([]string{"../memory/core", "../memory/write", "../memory/conversation"}, engineLeaves...),
	// The export and import format: it reads through the core and writes
	// memories back through the write path, and knows no other idea.
	"../memory/portable": append([]string{"../memory/core", "../memory/write"}, engineLeaves...),
	// Re-embedding on a model change: the storage side, over a pool and
	// an embedder; the façade will drive it.
	"../memory/reembed": engineLeaves,
	// Tests' state of a provisioned tenant, for the ideas' own tests;
	// imported by tests only.
	"../memory/core/coretest": append([]string{"../memory/core", "../tenant", "../testenv", "../naming"}, engineLeaves...),
	// Tests' checks of conversation memory, shared by its package and the
	// façade's tests; imported by tests only.
	"../memory/conversation/convtest": append([]string{"../memory/core", "../memory/conversation"}, engineLeaves...),
}

// TestEngineImportRule pins engineIdeas: a package of the engine imports
// only what its line allows.
func TestEngineImportRule(t *testing.T) {
	for pkg, allowed := range engineIdeas {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		self := "github.com/engram-dev/engram/internal" + strings.TrimPrefix(pkg, "..")
		for _, d := range strings.Fields(string(out)) {
			rel, ours := strings.CutPrefix(d, "github.com/engram-dev/engram/internal")
			if !ours || d == self || slices.Contains(allowed, ".."+rel) {
				continue
			}
			t.Errorf("%s imports %s; it may import only %v", pkg, d, allowed)
		}
	}
}

// engineWritesThrough are the ideas that write memories, each importing
// the write path directly: their writes go through write.Store (one dedup
// and transaction path), since an idea may not import the façade and no
// other package holds a way to write a memory.
var engineWritesThrough = []string{"../memory/longterm"}

// TestExtractionWritesThroughTheWritePath pins engineWritesThrough: long-term
// memory (fact and session extraction) imports internal/memory/write.
func TestExtractionWritesThroughTheWritePath(t *testing.T) {
	const write = "github.com/engram-dev/engram/internal/memory/write"
	for _, pkg := range engineWritesThrough {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		if !slices.Contains(strings.Fields(string(out)), write) {
			t.Errorf("%s does not import %s; its writes of memories must go through it", pkg, write)
		}
	}
}

// TestEngineFacadeIsTheDoor pins the other side of engineIdeas: outside
// internal/memory, code (tests included) imports the engine through its
// façade internal/memory only, never a part (core, conversation, the
// leaves), so a part can be cut or renamed without touching the service,
// the jobs or the operator.
func TestEngineFacadeIsTheDoor(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const engine = "github.com/engram-dev/engram/internal/memory"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == engine || strings.HasPrefix(fields[0], engine+"/") {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, engine+"/") {
				t.Errorf("%s imports %s; outside the engine, import its façade %s", fields[0], imp, engine)
			}
		}
	}
}
