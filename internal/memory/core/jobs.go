package core

import (
	"context"
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
}

// Batches runs sql (one parameter: the batch size, returning the rows
// changed) until a batch changes fewer rows than the batch size.
func (s *State) Batches(ctx context.Context, opts JobOptions, res *JobResult, what, sql string) error {
	for {
		var n int64
		if err := s.Pool.QueryRow(ctx, sql, opts.BatchSize).Scan(&n); err != nil {
			return DBErr(what, err)
		}
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
