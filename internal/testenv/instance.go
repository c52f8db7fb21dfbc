package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Instance is a second, throw-away PostgreSQL server with pgvector
// (`hack/pgvector.sh instance ... NAME`) that a test may stop and start
// again: a database server going down under a running operator. Each
// suite uses a name of its own (the fault suite has "faults").
type Instance struct {
	name   string
	script string
	url    string // of database postgres, while started
}

// NewInstance returns the instance NAME, stopped when the test ends. It
// needs root (the script runs the server from its chroot): without it the
// test fails under `make test` and is skipped otherwise.
func NewInstance(t testing.TB, name string) *Instance {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "a second PostgreSQL server (hack/pgvector.sh instance "+name+")", "it needs root: run the tests as root, as make test does")
	}
	in := &Instance{name: name, script: filepath.Join(RepoRoot(), "hack", "pgvector.sh")}
	t.Cleanup(func() { in.run(t, "stop") })
	return in
}

// Start starts the server (again) on the port it had, when it can, and
// returns the admin URL of its database postgres.
func (in *Instance) Start(t testing.TB) string {
	t.Helper()
	in.url = in.run(t, "start")
	return in.url
}

// Stop shuts the server down cleanly: its clients get connection refused.
func (in *Instance) Stop(t testing.TB) {
	t.Helper()
	in.run(t, "stop")
}

// Fault applies the script's action "stop" (a clean shutdown) or "kill"
// (SIGKILL of the postmaster: no checkpoint, backends cut off
// mid-statement) to the running server.
func (in *Instance) Fault(t testing.TB, action string) {
	t.Helper()
	in.run(t, action)
}

// NewDatabase creates a fresh database with the vector extension on the
// started instance and returns its admin URL; it is dropped when the test
// ends (if the instance runs then).
func (in *Instance) NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "engram_test_" + randomHex(6)
	if err := Exec(ctx, in.url, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("creating database %s on instance %s: %v", name, in.name, err)
	}
	t.Cleanup(func() { dropDatabase(t, in.url, name) })
	dbURL, err := withDatabase(in.url, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := Exec(ctx, dbURL, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		t.Fatalf("CREATE EXTENSION vector in %s: %v", name, err)
	}
	return dbURL
}

func (in *Instance) run(t testing.TB, action string) string {
	t.Helper()
	cmd := exec.Command(in.script, "instance", action, in.name)
	// Always a local server: DATABASE_URL must not make the script think
	// an external one is meant. Fast settings: tests only.
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "ENGRAM_PG_DURABILITY=fast")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/pgvector.sh instance %s %s: %v\n%s", action, in.name, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
