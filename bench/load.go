package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LoadStats is the loading of the service tenant through the batch API.
type LoadStats struct {
	Items       int            `json:"items"`
	Requests    int            `json:"requests"`
	BatchSize   int            `json:"batchSize"`
	Concurrency int            `json:"concurrency"`
	ElapsedSec  float64        `json:"elapsedSec"`
	ItemsPerSec float64        `json:"itemsPerSec"`
	Actions     map[string]int `json:"actions"`
}

// loadBatch is the largest batch the API accepts (internal/server maxBatchItems).
const loadBatch = 100

type loadTask struct {
	owner    string
	from, to int
}

// loadTasks lists the batches: the large owners in rounds (batch 1 of every
// owner, then batch 2, ...), the way many users' memories arrive
// interleaved over time, so an owner's rows are spread over the table
// instead of lying together; then the small owners.
func (h *harness) loadTasks() []loadTask {
	var tasks []loadTask
	for from := 0; from < h.scale.PerOwner; from += loadBatch {
		for o := range h.scale.Owners {
			tasks = append(tasks, loadTask{owner: ownerName(o), from: from, to: min(from+loadBatch, h.scale.PerOwner)})
		}
	}
	for i, n := range h.scale.SmallOwners {
		tasks = append(tasks, loadTask{owner: smallName(i), from: 0, to: n})
	}
	return tasks
}

// load writes every memory through POST /v1/owners/{owner}/memories/batch.
func (h *harness) load(ctx context.Context, api *apiClient) (LoadStats, error) {
	tasks := h.loadTasks()
	st := LoadStats{Requests: len(tasks), BatchSize: loadBatch, Concurrency: h.scale.LoadConcurrency, Actions: map[string]int{}}
	// Bounded in time: far slower than any healthy run.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.scale.Memories()/20+60)*time.Second)
	defer cancel()
	ch := make(chan loadTask)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range h.scale.LoadConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				acts, err := h.loadOne(ctx, api, t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				for _, a := range acts {
					st.Actions[a]++
					st.Items++
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range tasks {
		if ctx.Err() != nil {
			break
		}
		ch <- t
	}
	close(ch)
	wg.Wait()
	elapsed := time.Since(start)
	st.ElapsedSec = round3(elapsed.Seconds())
	st.ItemsPerSec = round3(float64(st.Items) / elapsed.Seconds())
	if firstErr != nil {
		return st, fmt.Errorf("loading: %w", firstErr)
	}
	if ctx.Err() != nil {
		return st, fmt.Errorf("loading: %w", ctx.Err())
	}
	return st, nil
}

func (h *harness) loadOne(ctx context.Context, api *apiClient, t loadTask) ([]string, error) {
	items := make([]item, 0, t.to-t.from)
	for i := t.from; i < t.to; i++ {
		items = append(items, h.corpus.stored(t.owner, i))
	}
	var res apiBatchResult
	if err := api.post(ctx, ownerPath(t.owner, "/memories/batch"), map[string]any{"items": items}, &res); err != nil {
		return nil, err
	}
	if len(res.Results) != len(items) {
		return nil, fmt.Errorf("batch of %d items for %s answered %d results", len(items), t.owner, len(res.Results))
	}
	acts := make([]string, len(res.Results))
	for i, r := range res.Results {
		acts[i] = r.Action
	}
	return acts, nil
}

// settleTable runs VACUUM (ANALYZE) on the memories table, as autovacuum
// would shortly after a bulk load, so the measurements see a settled table
// (statistics, visibility map) instead of autovacuum starting halfway through.
func settleTable(ctx context.Context, adminURL, schema string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to vacuum: %w", err)
	}
	defer conn.Close(ctx)
	for _, t := range []string{"memories", "memory_history"} {
		if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+pgx.Identifier{schema, t}.Sanitize()); err != nil {
			return fmt.Errorf("vacuuming %s.%s: %w", schema, t, err)
		}
	}
	return nil
}

// tableMiB is the size of the memories table with indexes and TOAST.
func tableMiB(ctx context.Context, pool *pgxpool.Pool, schema string) (float64, error) {
	var b int64
	err := pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, pgx.Identifier{schema, "memories"}.Sanitize()).Scan(&b)
	return round3(float64(b) / (1 << 20)), err
}
