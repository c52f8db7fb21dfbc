package specs

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSpecsArePure: the builders import no Kubernetes client, so none of
// them can read or write the API server.
func TestSpecsArePure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, d := range strings.Fields(string(out)) {
		if strings.HasPrefix(d, "sigs.k8s.io/controller-runtime") || strings.HasPrefix(d, "k8s.io/client-go") ||
			d == "github.com/engram-dev/engram/internal/controller" {
			t.Errorf("specs depends on %s", d)
		}
	}
}
