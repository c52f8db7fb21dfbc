package core

import (
	"context"
	"fmt"
	"time"
)

// PaceClock is the time source of a Pace: the real clock unless a test
// injects one (JobOptions.Clock).
type PaceClock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends, whichever is first, and returns
	// ctx's error when it ended first.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MaxPause bounds one pause between two batches, whatever the batch took
// or the budget asks: a stalled batch does not park the job for long, and
// the job's run time limit (its context) still ends it.
const MaxPause = 10 * time.Second

// Pace spaces the batches of one maintenance operation (issue 32: jobs
// that do not hurt writers). Between two batches it pauses
//   - for the duty cycle: batch time × (1/Duty − 1), so the job works at
//     most the Duty share of its wall time (Duty 0.5: a pause as long as
//     the batch), and
//   - for the budget: until the rows done so far, at RowsPerSecond, would
//     have taken at least the time since the operation began,
//
// whichever is longer, at most MaxPause. With neither set it never pauses.
// The pauses are added to JobResult.Paused.
type Pace struct {
	duty  float64
	rate  float64
	clock PaceClock
	res   *JobResult
	began time.Time // the operation's first batch
	batch time.Time // the current batch's start; zero before the first
	rows  int64
}

// NewPace returns the pace of one operation run with opts, adding its
// pauses to res.Paused.
func NewPace(opts JobOptions, res *JobResult) *Pace {
	c := opts.Clock
	if c == nil {
		c = realClock{}
	}
	return &Pace{duty: opts.Duty, rate: opts.RowsPerSecond, clock: c, res: res}
}

// Next is called before each batch: it pauses for the previous batch (none
// before the first) and starts timing this one. It returns ctx's error if
// the job's context ended during the pause.
func (p *Pace) Next(ctx context.Context) error {
	now := p.clock.Now()
	if p.batch.IsZero() {
		p.began, p.batch = now, now
		return nil
	}
	if d := p.pause(now); d > 0 {
		err := p.clock.Sleep(ctx, d)
		p.res.Paused += d
		if err != nil {
			return fmt.Errorf("pausing between batches: %w", err)
		}
		now = p.clock.Now()
	}
	p.batch = now
	return nil
}

// Rows records the rows the current batch touched (scanned or changed:
// what it cost), for the RowsPerSecond budget.
func (p *Pace) Rows(n int64) { p.rows += n }

// pause is how long to wait after the batch that ran from p.batch to now.
func (p *Pace) pause(now time.Time) time.Duration {
	var d time.Duration
	if p.duty > 0 && p.duty < 1 {
		d = time.Duration(float64(now.Sub(p.batch)) * (1/p.duty - 1))
	}
	if p.rate > 0 {
		owed := time.Duration(float64(p.rows) / p.rate * float64(time.Second))
		d = max(d, owed-now.Sub(p.began))
	}
	return min(d, MaxPause)
}
