// Package jobrun is `manager job`: one maintenance run (decay, expire,
// purge, compact, summarize, sessions, export) of one tenant, as the RetentionJob's CronJob starts it.
// It prints one memory.JobSummary as JSON to stdout and writes the same
// JSON to the termination-message file, where the operator reads it.
package jobrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// Runner is what Run needs of a store (memory.Store implements it).
type Runner interface {
	WithJobLock(ctx context.Context, fn func(context.Context) error) error
	RunJob(ctx context.Context, op string, opts memory.JobOptions) (*memory.JobResult, error)
}

// ParseOps reads a comma-separated list of operations and returns them in
// the canonical order of memory.RunOperations (decay before expire before
// purge before compact, export last, whatever order they were given in), without repeats.
func ParseOps(s string) ([]string, error) {
	want := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		op := strings.TrimSpace(part)
		if op == "" {
			continue
		}
		if !slices.Contains(memory.RunOperations, op) {
			return nil, fmt.Errorf("unknown operation %q: want a comma-separated list of %s", op, strings.Join(memory.RunOperations, ", "))
		}
		want[op] = true
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("no operation given: want a comma-separated list of %s", strings.Join(memory.RunOperations, ", "))
	}
	var ops []string
	for _, op := range memory.RunOperations {
		if want[op] {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// MessageSkippedLocked is the message of a run that found the lock held.
const MessageSkippedLocked = "skipped: locked"

// maxMessageBytes keeps the summary well under the kubelet's 4 KiB limit
// for termination messages.
const maxMessageBytes = 1024

// Run runs ops in order under the tenant's maintenance lock and summarises
// them. It stops at the first failing operation; the summary keeps the
// operations that completed before it.
func Run(ctx context.Context, r Runner, schema string, ops []string, opts memory.JobOptions) memory.JobSummary {
	sum := memory.JobSummary{Schema: schema, DryRun: opts.DryRun, StartTime: time.Now().UTC(), Operations: []memory.JobSummaryOp{}}
	err := r.WithJobLock(ctx, func(ctx context.Context) error {
		for _, op := range ops {
			if op == memory.OpExport {
				res, err := runExport(ctx, r, opts.DryRun)
				if err != nil {
					return err
				}
				sum.Operations = append(sum.Operations, *res)
				continue
			}
			start := time.Now()
			res, err := r.RunJob(ctx, op, opts)
			if err != nil {
				return err // RunJob names the operation
			}
			d := res.Duration
			if d <= 0 {
				d = time.Since(start)
			}
			sum.Operations = append(sum.Operations, memory.JobSummaryOp{
				Name: op, Scanned: res.Scanned, Affected: res.Affected, Batches: res.Batches, DurationMillis: d.Milliseconds(),
				Pending: res.Pending,
			})
		}
		return nil
	})
	sum.CompletionTime = time.Now().UTC()
	switch {
	case errors.Is(err, memory.ErrLocked):
		sum.Result, sum.Message = memory.RunSkipped, MessageSkippedLocked
	case err != nil:
		sum.Result, sum.Message = memory.RunFailed, truncate(failureMessage(err), maxMessageBytes)
	default:
		sum.Result = memory.RunSucceeded
	}
	return sum
}

// runExport runs the export operation of r, which needs a destination.
func runExport(ctx context.Context, r Runner, dryRun bool) (*memory.JobSummaryOp, error) {
	ex, ok := r.(Exporter)
	if !ok {
		return nil, errors.New("export: no destination given (--export-dir or --export-s3-bucket)")
	}
	return ex.RunExport(ctx, dryRun)
}

// MessageUnavailable starts the message of a run that failed because the
// database could not be used (down, restarting, in recovery, connection
// lost): nothing is wrong with the tenant, and the next scheduled run
// continues where this one stopped.
const MessageUnavailable = "the database is unavailable; the next scheduled run continues: "

// failureMessage is the summary message of a failed run.
func failureMessage(err error) string {
	if memory.IsUnavailable(err) {
		return MessageUnavailable + err.Error()
	}
	return err.Error()
}

// Failed is the summary of a run that could not start (bad flags, config
// or database URL), so the operator still learns why.
func Failed(schema string, dryRun bool, err error) memory.JobSummary {
	now := time.Now().UTC()
	return memory.JobSummary{Schema: schema, DryRun: dryRun, Result: memory.RunFailed, StartTime: now, CompletionTime: now,
		Operations: []memory.JobSummaryOp{}, Message: truncate(err.Error(), maxMessageBytes)}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
