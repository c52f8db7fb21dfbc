package tenant

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestInspect: what the operator shows of a database (a MemoryDatabase's
// status) comes from the server: its version, the installed extensions with
// pgvector among them, no Citus on a plain PostgreSQL and the coordinator
// with its workers on Citus (the Citus pass of make test), and a size that
// grows with a tenant.
func TestInspect(t *testing.T) {
	admin, _ := adminPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := Inspect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if before.Version == "" || strings.Contains(before.Version, " ") || before.Bytes < 1<<20 {
		t.Errorf("Inspect = %+v", before)
	}
	switch c := before.Citus; {
	case testenv.OnCitus() && (c == nil || !c.Coordinator || len(c.Workers) == 0):
		t.Errorf("Inspect of a Citus coordinator: Citus = %+v, want the coordinator and its workers", c)
	case !testenv.OnCitus() && c != nil:
		t.Errorf("Inspect of plain PostgreSQL: Citus = %+v, want nil", c)
	}
	vector := ""
	for _, e := range before.Extensions {
		if e.Name == "vector" {
			vector = e.Version
		}
	}
	if vector == "" {
		t.Errorf("extensions %+v lack vector", before.Extensions)
	}
	if _, err := admin.Exec(ctx, `CREATE TABLE filler AS SELECT g, repeat('x', 500) AS pad FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	after, err := Inspect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if after.Bytes-before.Bytes < 5<<20 {
		t.Errorf("the database grew by %d bytes after a 10 MB table", after.Bytes-before.Bytes)
	}
	t.Logf("PostgreSQL %s, pgvector %s, %d extensions, %d -> %d bytes", after.Version, vector, len(after.Extensions), before.Bytes, after.Bytes)
}
