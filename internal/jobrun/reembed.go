package jobrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// OpReembed is the operation of a re-embed Job (`--ops=reembed`, alone):
// the operator starts it after a spec.embedding change.
const OpReembed = "reembed"

// ExitEmbedderUnreachable is the exit code of a re-embed run that stopped
// because the new embedder kept failing (specs.ReembedExitUnreachable).
const ExitEmbedderUnreachable = 3

// ErrEmbedderUnreachable: the embedder failed for longer than
// ReembedLoop.UnreachableAfter.
var ErrEmbedderUnreachable = errors.New("the new embedder kept failing")

// batchFiller is what the loop needs of a reembed.Filler.
type batchFiller interface {
	FillBatch(ctx context.Context, n int) (filled int64, done bool, err error)
}

// ReembedLoop fills the shadow columns batch after batch (issue 29),
// and once no row is left keeps looking for the rows the service writes
// meanwhile (every Idle) until the re-embed leaves filling: the operator
// switches it while the run is up, whenever it reads no row left, so a
// tenant that writes steadily is switched too (hostile review H4). It is
// bounded by MaxRun (the next Job resumes: the fill is resumable by
// construction), paced by a pause of Pace times each batch's duration
// after it (so the fill takes at most 1/(1+Pace) of the time it could on
// the database), and backing off on embedder errors for at most
// UnreachableAfter.
type ReembedLoop struct {
	Filler batchFiller
	Batch  int
	Pace   float64
	// MaxRun ends the run (successfully, rows left) after this long.
	MaxRun time.Duration
	// UnreachableAfter: consecutive embedder failures over this long end
	// the run with ErrEmbedderUnreachable.
	UnreachableAfter time.Duration
	// Idle is the pause between two looks for rows once none is left
	// (DefaultReembedIdle when zero): the run keeps filling the rows the
	// service writes until the operator switches (or aborts) the re-embed.
	Idle   time.Duration
	Logger *slog.Logger
	// sleep waits d or until ctx ends (tests replace it).
	sleep func(ctx context.Context, d time.Duration) error
}

// ReembedResult is what one run filled. Done: the re-embed left filling
// (switched or aborted) during the run.
type ReembedResult struct {
	Filled  int64
	Batches int
	Done    bool
	// CaughtUp: a batch found no row left at least once.
	CaughtUp bool
}

// DefaultReembedIdle is ReembedLoop.Idle's default: short, so that under
// steady writes the rows left are 0 most of the time, and a switch that
// reads 0 usually locks the tables before the next write. Measured
// (TestReembedSwitchesUnderSteadyWrites, a write every 200 ms): with 1 s,
// 5 switch tries in 60 s all found a row written since their count; with
// 250 ms the first try switches. An idle look is one read of the reembed
// row and four empty reads of the partial indexes of the rows left.
const DefaultReembedIdle = 250 * time.Millisecond

// Bounds of the backoff on embedder errors.
const (
	reembedBackoffMin = time.Second
	reembedBackoffMax = 30 * time.Second
)

// maxReembedBatches bounds one run's loop whatever the clock says: 10
// million rows at the smallest batch.
const maxReembedBatches = 10_000_000

// Run fills until the re-embed leaves filling (switched or aborted: done),
// MaxRun passes, or an error that is not the embedder's.
func (l ReembedLoop) Run(ctx context.Context) (ReembedResult, error) {
	var res ReembedResult
	sleep := l.sleep
	if sleep == nil {
		sleep = memory.Sleep
	}
	logger := l.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	idle := l.Idle
	if idle <= 0 {
		idle = DefaultReembedIdle
	}
	start := time.Now()
	var failingSince time.Time
	backoff := reembedBackoffMin
	for range maxReembedBatches {
		if time.Since(start) >= l.MaxRun {
			logger.Info("re-embed run reached its time bound; the next run resumes", "filled", res.Filled, "maxRun", l.MaxRun)
			return res, nil
		}
		t0 := time.Now()
		n, done, err := l.Filler.FillBatch(ctx, l.Batch)
		took := time.Since(t0)
		switch {
		case errors.Is(err, memory.ErrReembedNotFilling):
			logger.Info("no re-embed is under way (switched or aborted)")
			res.Done = true
			return res, nil
		case err != nil && isEmbedderError(err):
			if failingSince.IsZero() {
				failingSince = t0
			}
			if time.Since(failingSince) >= l.UnreachableAfter {
				return res, fmt.Errorf("%w for %s: %w", ErrEmbedderUnreachable, time.Since(failingSince).Round(time.Second), err)
			}
			logger.Warn("the embedder failed; retrying", "error", err.Error(), "retryIn", backoff)
			if err := sleep(ctx, backoff); err != nil {
				return res, fmt.Errorf("re-embed interrupted: %w", err)
			}
			backoff = min(2*backoff, reembedBackoffMax)
			continue
		case err != nil:
			return res, fmt.Errorf("re-embed batch: %w", err)
		}
		failingSince, backoff = time.Time{}, reembedBackoffMin
		if done {
			if !res.CaughtUp {
				logger.Info("no row left; filling what the service writes until the switch", "filled", res.Filled)
			}
			res.CaughtUp = true
			if err := sleep(ctx, idle); err != nil {
				return res, fmt.Errorf("re-embed interrupted: %w", err)
			}
			continue
		}
		res.Filled += n
		res.Batches++
		if pause := time.Duration(float64(took) * l.Pace); pause > 0 {
			if err := sleep(ctx, pause); err != nil {
				return res, fmt.Errorf("re-embed interrupted: %w", err)
			}
		}
	}
	return res, nil
}

// embedderError marks an error of the embedder (not of the database).
type embedderError struct{ err error }

func (e embedderError) Error() string { return e.err.Error() }
func (e embedderError) Unwrap() error { return e.err }

func isEmbedderError(err error) bool {
	var e embedderError
	return errors.As(err, &e)
}

// markedEmbedder wraps every error of its embedder as an embedderError.
type markedEmbedder struct{ memory.Embedder }

func (m markedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	v, err := m.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, embedderError{err}
	}
	return v, nil
}
