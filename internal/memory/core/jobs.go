package core

import (
	"context"
	"fmt"
	"time"
)

// JobOptions apply to every maintenance operation.
type JobOptions struct {
	// DryRun counts what would change and changes nothing.
	DryRun bool
	// BatchSize bounds the rows one statement touches; 0 means 1000. For
	// compact it bounds the memories one batch looks at and supersedes,
	// and so how long a write of the owner may wait for compaction.
	BatchSize int
	// OwnerBudget bounds the time compact spends on one owner in one run;
	// the owner's pass continues in the next run. 0 means
	// DefaultCompactOwnerBudget. At least one batch always runs.
	OwnerBudget time.Duration
	// Duty is the share of its wall time a job may work, in (0, 1]: after
	// each batch it pauses batch time × (1/Duty − 1) (Pace). 0 or 1: no
	// pause. RowsPerSecond, when positive, caps the rows it touches per
	// second of wall time the same way. Both keep the job's I/O, WAL and
	// lock bursts apart so writers in between are not queued behind them.
	Duty          float64
	RowsPerSecond float64
	// Clock is Pace's time source; nil is the real clock (tests inject one).
	Clock PaceClock
}

// JobResult counts what one maintenance operation did.
type JobResult struct {
	Operation string `json:"operation"`
	DryRun    bool   `json:"dryRun"`
	// Scanned rows considered.
	Scanned int64 `json:"scanned"`
	// Affected rows forgotten, expired, purged or superseded (would be, in a dry run).
	Affected int64         `json:"affected"`
	Duration time.Duration `json:"-"`
	// Batches is the number of bounded statements run.
	Batches int `json:"batches"`
	// Pending counts the owners whose compaction pass ran out of its time
	// budget and continues in the next run.
	Pending int64 `json:"pending,omitempty"`
	// Paused is the time spent in Pace's pauses between batches.
	Paused time.Duration `json:"-"`
}

// Batches runs sql (one parameter: the batch size, returning the rows
// changed) until a batch changes fewer rows than the batch size.
// Batches are spaced by opts' pace (Pace).
func (s *State) Batches(ctx context.Context, opts JobOptions, res *JobResult, what, sql string) error {
	pace := NewPace(opts, res)
	for {
		if err := pace.Next(ctx); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		var n int64
		if err := s.Pool.QueryRow(ctx, sql, opts.BatchSize).Scan(&n); err != nil {
			return DBErr(what, err)
		}
		pace.Rows(n)
		res.Batches++
		res.Scanned += n
		res.Affected += n
		if n < int64(opts.BatchSize) {
			return nil
		}
	}
}

// Count fills a dry run's counts from one COUNT query.
func (s *State) Count(ctx context.Context, res *JobResult, sql string) error {
	var n int64
	if err := s.Pool.QueryRow(ctx, sql).Scan(&n); err != nil {
		return DBErr("counting", err)
	}
	res.Batches, res.Scanned, res.Affected = 1, n, n
	return nil
}
