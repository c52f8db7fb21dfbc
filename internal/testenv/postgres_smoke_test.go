package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestSmokePostgres proves the PostgreSQL test infrastructure: a pool of four
// real connections, pgvector's HNSW index and cosine KNN, full-text search,
// and an advisory lock that one connection holds while the others are refused.
func TestSmokePostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := newVectorPool(t, testenv.NewDatabase(t))

	var version, vecVersion string
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version'), extversion FROM pg_extension WHERE extname = 'vector'`).Scan(&version, &vecVersion); err != nil {
		t.Fatalf("reading versions: %v", err)
	}
	t.Logf("PostgreSQL %s, pgvector %s", version, vecVersion)

	mustExec(ctx, t, pool, `CREATE TABLE items (id int PRIMARY KEY, body text NOT NULL, embedding vector(3) NOT NULL,
		tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)`)
	mustExec(ctx, t, pool, `CREATE INDEX items_hnsw ON items USING hnsw (embedding vector_cosine_ops)`)
	mustExec(ctx, t, pool, `CREATE INDEX items_tsv ON items USING gin (tsv)`)
	for _, r := range []struct {
		id   int
		body string
		vec  []float32
	}{
		{1, "the cat sleeps on the sofa", []float32{1, 0, 0}},
		{2, "dogs chase cats in the garden", []float32{0.9, 0.1, 0}},
		{3, "quarterly revenue grew by ten percent", []float32{0, 0, 1}},
	} {
		mustExec(ctx, t, pool, `INSERT INTO items (id, body, embedding) VALUES ($1, $2, $3)`, r.id, r.body, pgv.NewVector(r.vec))
	}

	t.Run("hnsw cosine knn", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		// Three rows would be read sequentially; make the planner prove the index works.
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		got := ids(ctx, t, tx, `SELECT id FROM items ORDER BY embedding <=> $1 LIMIT 2`, pgv.NewVector([]float32{1, 0, 0}))
		if fmt.Sprint(got) != "[1 2]" {
			t.Fatalf("knn = %v, want [1 2]", got)
		}
		planText := strings.Join(planLines(ctx, t, tx), "\n")
		if !strings.Contains(planText, "items_hnsw") {
			t.Fatalf("the KNN query did not use the HNSW index; plan:\n%s", planText)
		}
		t.Logf("plan: %s", planText)
	})

	t.Run("full text", func(t *testing.T) {
		got := ids(ctx, t, pool, `SELECT id FROM items WHERE tsv @@ websearch_to_tsquery('english', $1) ORDER BY id`, "cat")
		if fmt.Sprint(got) != "[1 2]" {
			t.Fatalf("full-text 'cat' = %v, want [1 2] (stemming cats -> cat)", got)
		}
	})

	t.Run("advisory lock across connections", func(t *testing.T) {
		holder, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Release()
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(42)`); err != nil {
			t.Fatal(err)
		}
		// Three more goroutines take the other three connections of the pool.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var taken int
		for range 3 {
			wg.Go(func() {
				c, err := pool.Acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Release()
				var got bool
				if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock(42)`).Scan(&got); err != nil {
					t.Error(err)
				}
				mu.Lock()
				if got {
					taken++
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond) // keep the connection so all four are open at once
			})
		}
		wg.Wait()
		if taken != 0 {
			t.Fatalf("%d other connections took advisory lock 42 while it was held", taken)
		}
		if n := pool.Stat().TotalConns(); n != 4 {
			t.Errorf("pool has %d connections, want 4", n)
		}
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(42)`); err != nil {
			t.Fatal(err)
		}
		var got bool
		if err := pool.QueryRow(ctx, `SELECT pg_try_advisory_lock(42)`).Scan(&got); err != nil || !got {
			t.Fatalf("lock not free after unlock: got=%v err=%v", got, err)
		}
	})
}

// dbtx is what a pool and a transaction have in common.
type dbtx interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

func mustExec(ctx context.Context, t *testing.T, db dbtx, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func ids(ctx context.Context, t *testing.T, db dbtx, sql string, args ...any) []int {
	t.Helper()
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return got
}

// planLines returns the whole EXPLAIN of the KNN query, one line per node.
func planLines(ctx context.Context, t *testing.T, db dbtx) []string {
	t.Helper()
	rows, err := db.Query(ctx, `EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <=> '[1,0,0]' LIMIT 2`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func newVectorPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error { return pgxvec.RegisterTypes(ctx, c) }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
