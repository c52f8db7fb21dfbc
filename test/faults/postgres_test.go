package faults

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// instance is a throw-away PostgreSQL server that this suite may restart
// and kill (hack/pgvector.sh instance). Its server default is
// synchronous_commit=off: what survives a kill is what Engram's own
// sessions asked to be durable.
type instance struct {
	name   string
	script string
}

func newInstance(t *testing.T, name string) *instance {
	t.Helper()
	if os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatalf("the fault suite needs root to run a PostgreSQL it may kill (hack/pgvector.sh instance); run make test as root")
		}
		t.Skip("the fault suite needs root to run a PostgreSQL it may kill")
	}
	in := &instance{name: name, script: filepath.Join(testenv.RepoRoot(), "hack", "pgvector.sh")}
	t.Cleanup(func() { in.run(t, "stop") })
	return in
}

// run calls the script with action and returns its stdout (the URL for start).
func (in *instance) run(t *testing.T, action string) string {
	t.Helper()
	cmd := exec.Command(in.script, "instance", action, in.name)
	// An instance is always local; the fast settings make synchronous_commit
	// off the server's default, so what survives a kill is what Engram's
	// sessions asked for themselves.
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "ENGRAM_PG_DURABILITY=fast")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/pgvector.sh instance %s %s: %v\n%s", action, in.name, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
