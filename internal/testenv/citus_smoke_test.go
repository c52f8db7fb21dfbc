package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestSmokeCitus proves the Citus test infrastructure: a fresh database of
// its own on the cluster of CITUS_URL, with the coordinator and two workers
// registered, pgvector on every node, and a distributed schema whose table
// is queried through the coordinator and found on a worker.
func TestSmokeCitus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testenv.NewCitusDatabase(t)
	pool := newVectorPool(t, url)

	var citus string
	var workers int
	if err := pool.QueryRow(ctx, `SELECT (SELECT extversion FROM pg_extension WHERE extname = 'citus'),
		(SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND isactive)`).Scan(&citus, &workers); err != nil {
		t.Fatalf("reading Citus: %v", err)
	}
	if workers != 2 {
		t.Fatalf("%d active workers, want 2", workers)
	}
	t.Logf("Citus %s, %d workers", citus, workers)
	mustExec(ctx, t, pool, `CREATE SCHEMA smoke`)
	mustExec(ctx, t, pool, `SELECT citus_schema_distribute('smoke')`)
	mustExec(ctx, t, pool, `CREATE TABLE smoke.items (id int PRIMARY KEY, embedding vector(3) NOT NULL)`)
	mustExec(ctx, t, pool, `INSERT INTO smoke.items VALUES (1, '[1,0,0]'), (2, '[0,1,0]')`)
	var nearest int
	if err := pool.QueryRow(ctx, `SELECT id FROM smoke.items ORDER BY embedding <=> $1::vector LIMIT 1`, "[0.1,0.9,0]").Scan(&nearest); err != nil || nearest != 2 {
		t.Fatalf("nearest through the coordinator: %d, %v; want 2", nearest, err)
	}
	var shard string
	if err := pool.QueryRow(ctx, `SELECT 'smoke.items_' || shardid FROM pg_dist_shard WHERE logicalrelid = 'smoke.items'::regclass`).Scan(&shard); err != nil {
		t.Fatalf("reading the shard: %v", err)
	}
	found := 0
	for _, w := range testenv.CitusWorkerURLs(t, url) {
		var here bool
		// By name: workers hide shards from catalog listings.
		if err := newVectorPool(t, w).QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, shard).Scan(&here); err != nil {
			t.Fatalf("looking for %s on %s: %v", shard, testenv.HostPort(w), err)
		}
		if here {
			found++
		}
	}
	if found != 1 {
		t.Fatalf("the shard of smoke.items is on %d workers, want 1", found)
	}
}
