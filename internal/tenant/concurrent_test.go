package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"
)

// withExtraMigration makes the package migrate one more (test) migration
// for the duration of the test.
func withExtraMigration(t *testing.T, body string) int {
	t.Helper()
	saved, savedLatest := migrations, LatestVersion
	v := savedLatest + 1
	m := Migration{Version: v, Name: fmt.Sprintf("%04d_test", v), Concurrent: true,
		sql: template.Must(template.New("test").Option("missingkey=error").Parse(noTransactionMarker + "\n" + body))}
	migrations = append(slices.Clone(saved), m)
	LatestVersion = v
	t.Cleanup(func() { migrations, LatestVersion = saved, savedLatest })
	return v
}

// TestConcurrentIndexMigration builds an index on a 200,000-memory tenant
// while its login role keeps writing: the migration runs outside a
// transaction with CREATE INDEX CONCURRENTLY, replaces the INVALID index an
// interrupted build left behind, and no write fails meanwhile.
func TestConcurrentIndexMigration(t *testing.T) {
	pool, url := adminPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := newSpec(uniqueSchema(t, "engram_cic"), 16)
	res := mustProvision(t, pool, url, spec)
	memories := pgx.Identifier{spec.Schema, "memories"}.Sanitize()
	start := time.Now()
	if _, err := pool.Exec(ctx, `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'owner-' || (g % 200), 'user', 'contextual', 'memory ' || g,
		       array_fill((g % 97)::real / 97, ARRAY[16])::vector
		FROM generate_series(1, 200000) g`); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded 200,000 memories in %s", time.Since(start).Round(time.Millisecond))

	// An interrupted build: a concurrent unique index over duplicates fails
	// and leaves an INVALID index of the migration's name behind.
	const index = "memories_cic_test_idx"
	if _, err := pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY `+index+` ON `+memories+` (owner_id)`); err == nil {
		t.Fatal("the unique index over duplicate owners was built")
	}
	if valid := indexValid(t, ctx, pool, spec.Schema, index); valid == nil || *valid {
		t.Fatalf("no invalid index left behind to repair (valid=%v)", valid)
	}
	v := withExtraMigration(t, `CREATE INDEX CONCURRENTLY IF NOT EXISTS `+index+` ON {{.Schema}}.memories (owner_id, created_at);`)

	login := loginConn(t, url, res, res.Password)
	var wrote, failed atomic.Int64
	var firstErr atomic.Value
	writeCtx, stopWriting := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < 100000 && writeCtx.Err() == nil; i++ {
			_, err := login.Exec(writeCtx, `INSERT INTO memories (id, owner_id, source, category, content, embedding)
				VALUES (gen_random_uuid(), 'writer', 'user', 'contextual', $1, array_fill(0.5::real, ARRAY[16])::vector)`, fmt.Sprint("during ", i))
			switch {
			case err == nil:
				wrote.Add(1)
			case writeCtx.Err() == nil:
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}
	})
	start = time.Now()
	got, err := Provision(ctx, pool, spec)
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond) // writes after the build, too
	stopWriting()
	wg.Wait()
	if err != nil {
		t.Fatalf("migrating to version %d: %v", v, err)
	}
	t.Logf("migration %d on 200,000 rows: %s; %d writes meanwhile, %d failed", v, took.Round(time.Millisecond), wrote.Load(), failed.Load())
	if got.Version != v {
		t.Errorf("version after the migration = %d, want %d", got.Version, v)
	}
	if valid := indexValid(t, ctx, pool, spec.Schema, index); valid == nil || !*valid {
		t.Errorf("index %s is not valid after the migration (valid=%v)", index, valid)
	}
	if failed.Load() != 0 {
		t.Errorf("%d writes failed during the migration, first: %v", failed.Load(), firstErr.Load())
	}
	if wrote.Load() == 0 {
		t.Error("no write ran during the migration")
	}
	// The admin session went back to the pool as the admin.
	var role string
	if err := pool.QueryRow(ctx, `SELECT current_user`).Scan(&role); err != nil || role == OwnerRole(spec.Schema) {
		t.Errorf("a pooled admin session still runs as %q (%v)", role, err)
	}
}

func indexValid(t *testing.T, ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema, name string) *bool {
	t.Helper()
	var valid bool
	err := q.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, name).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &valid
}

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- engram:no-transaction\n-- why\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a ON s.t (x);\n\nCREATE INDEX CONCURRENTLY IF NOT EXISTS b\n  ON s.t (y);\n")
	if len(got) != 2 || concurrentIndex.FindStringSubmatch(got[1])[1] != "b" {
		t.Fatalf("splitStatements = %q", got)
	}
	// A statement may end in a comment (migration 1 does).
	got = splitStatements("CREATE TABLE s.t (x int) WITH (fillfactor = 90); -- why\nCREATE INDEX i ON s.t (x);\n")
	if len(got) != 2 || !strings.HasPrefix(got[1], "CREATE INDEX") {
		t.Fatalf("splitStatements with a trailing comment = %q", got)
	}
}

// TestSplitStatementsKeepsAFunctionBodyWhole: the statements of a PL/pgSQL
// body end their lines with semicolons; the body is one statement with its
// CREATE FUNCTION (migration 15's add_memory).
func TestSplitStatementsKeepsAFunctionBodyWhole(t *testing.T) {
	got := splitStatements("CREATE FUNCTION s.f(p int) RETURNS int\nLANGUAGE plpgsql\nAS $fn$\nBEGIN\n    -- why\n    PERFORM 1; -- what\n    RETURN $1;\nEND\n$fn$;\nSELECT 2;\n")
	if len(got) != 2 || !strings.HasSuffix(got[0], "$fn$;") || !strings.Contains(got[0], "RETURN $1;") || got[1] != "SELECT 2;" {
		t.Fatalf("splitStatements = %q", got)
	}
}
