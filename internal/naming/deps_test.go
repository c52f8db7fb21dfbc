package naming

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyRule pins the rule of the package doc: naming imports the
// standard library only, so internal/memory (no Kubernetes imports at all,
// docs/architecture.md) and internal/tenant may use it without pulling Kubernetes in.
func TestDependencyRule(t *testing.T) {
	for _, pkg := range []string{".", "../memory", "../tenant"} {
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
		}
	}
}
