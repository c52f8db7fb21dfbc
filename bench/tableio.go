package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// tableIO is a reading of the cumulative statistics of the memories table
// and of the database.
type tableIO struct {
	updates, hot int64 // rows updated, of them HOT (pg_stat_user_tables)
	fetches      int64 // heap rows fetched by index and index-only scans (idx_tup_fetch)
	heapPages    int64 // heap pages read or hit (pg_statio_user_tables)
	sessions     int64 // sessions opened in the database (pg_stat_database)
}

// statsFlushWait lets busy backends flush their statistics (at most once
// a second) before a reading. A backend that went idle right after a flush
// may hold its counters for up to 10 s more, so the counters of a 20 s cell
// are approximate; probes wait longer (statsIdleWait).
const statsFlushWait = 1100 * time.Millisecond

// readTableIO reads the counters after statsFlushWait.
func readTableIO(ctx context.Context, pool *pgxpool.Pool, schema string) (tableIO, error) {
	time.Sleep(statsFlushWait)
	var t tableIO
	err := pool.QueryRow(ctx, `SELECT coalesce(s.n_tup_upd, 0), coalesce(s.n_tup_hot_upd, 0), coalesce(s.idx_tup_fetch, 0),
			coalesce(io.heap_blks_hit, 0) + coalesce(io.heap_blks_read, 0),
			(SELECT coalesce(sessions, 0) FROM pg_stat_database WHERE datname = current_database())
		FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid)
		WHERE s.schemaname = $1 AND s.relname = 'memories'`, schema).Scan(&t.updates, &t.hot, &t.fetches, &t.heapPages, &t.sessions)
	return t, err
}

func (t tableIO) minus(o tableIO) tableIO {
	return tableIO{updates: t.updates - o.updates, hot: t.hot - o.hot, fetches: t.fetches - o.fetches,
		heapPages: t.heapPages - o.heapPages, sessions: t.sessions - o.sessions}
}

// PerOp is what one operation costs the memories table, measured over a
// sequential probe of probeOps operations of one side alone.
type PerOp struct {
	Ops         int     `json:"ops"`
	RowsUpdated float64 `json:"rowsUpdatedPerOp"`
	HeapFetches float64 `json:"heapFetchesPerOp"`
	HeapPages   float64 `json:"heapPagesPerOp"`
}

// probeOps is the length of a probe: enough to average, short enough to
// add seconds, not minutes.
const probeOps = 100

// statsIdleWait is how long a probe waits before each reading so that
// every backend's counters of the operations before it are in: a backend
// that flushed less than a second ago defers its next flush until it has
// been idle for PGSTAT_IDLE_INTERVAL (10 s), and the service's access
// statistics are written up to accessInterval (2 s) after the last search.
// A shorter wait attributed one side's counters to the next side probed.
const statsIdleWait = 11 * time.Second

// probe runs each op probeOps times on one worker, one after the other,
// and divides the table's counters by the operations: rows updated
// (access statistics), heap rows fetched (Heap Fetches of index-only
// scans, rows of index and bitmap scans) and heap pages touched per
// operation. Consecutive sides share a reading.
func probe(ctx context.Context, pool *pgxpool.Pool, schema string, ops ...opFunc) ([]PerOp, error) {
	time.Sleep(statsIdleWait)
	prev, err := readTableIO(ctx, pool, schema)
	if err != nil {
		return nil, err
	}
	out := make([]PerOp, len(ops))
	for i, op := range ops {
		s := runLoad(ctx, 1, time.Minute, probeOps, op)
		time.Sleep(statsIdleWait)
		cur, err := readTableIO(ctx, pool, schema)
		if err != nil {
			return nil, err
		}
		d := cur.minus(prev)
		prev = cur
		if n := len(s.latencies); n > 0 {
			f := float64(n)
			out[i] = PerOp{Ops: n, RowsUpdated: round3(float64(d.updates) / f), HeapFetches: round3(float64(d.fetches) / f),
				HeapPages: round3(float64(d.heapPages) / f)}
		}
	}
	return out, nil
}
