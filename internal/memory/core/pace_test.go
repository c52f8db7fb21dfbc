package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stepClock is a PaceClock whose every Now advances it by step (a batch
// "takes" step) and whose Sleep advances it by the time slept, recording
// each pause.
type stepClock struct {
	now    time.Time
	step   time.Duration
	sleeps []time.Duration
}

func (c *stepClock) Now() time.Time {
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func TestPaceDutyCycle(t *testing.T) {
	for _, tc := range []struct {
		duty float64
		want time.Duration // pause after a 10 ms batch
	}{{0.5, 10 * time.Millisecond}, {0.25, 30 * time.Millisecond}, {1, 0}, {0, 0}} {
		clock := &stepClock{now: time.Unix(0, 0), step: 10 * time.Millisecond}
		res := &JobResult{}
		p := NewPace(JobOptions{Duty: tc.duty, Clock: clock}, res)
		for range 4 {
			if err := p.Next(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		// No pause before the first batch, one after each of the other three.
		if got := res.Paused; got != 3*tc.want {
			t.Errorf("duty %g: paused %s, want %s (sleeps %v)", tc.duty, got, 3*tc.want, clock.sleeps)
		}
		if tc.want == 0 && len(clock.sleeps) != 0 {
			t.Errorf("duty %g: slept %v, want no sleep", tc.duty, clock.sleeps)
		}
	}
}

func TestPaceRowBudgetAndCap(t *testing.T) {
	clock := &stepClock{now: time.Unix(0, 0), step: 10 * time.Millisecond}
	res := &JobResult{}
	p := NewPace(JobOptions{RowsPerSecond: 100, Clock: clock}, res)
	ctx := context.Background()
	if err := p.Next(ctx); err != nil {
		t.Fatal(err)
	}
	p.Rows(50) // 50 rows at 100/s are 500 ms; the batch took 10 ms
	if err := p.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if want := 490 * time.Millisecond; res.Paused != want {
		t.Fatalf("budget pause %s, want %s", res.Paused, want)
	}
	// The longer of duty and budget wins, capped at MaxPause.
	p = NewPace(JobOptions{Duty: 0.5, RowsPerSecond: 1, Clock: clock}, res)
	res.Paused = 0
	if err := p.Next(ctx); err != nil {
		t.Fatal(err)
	}
	p.Rows(1000)
	if err := p.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if res.Paused != MaxPause {
		t.Fatalf("paused %s, want the cap %s", res.Paused, MaxPause)
	}
}

// A job whose run time limit ends during a pause stops there.
func TestPaceStopsWithContext(t *testing.T) {
	res := &JobResult{}
	p := NewPace(JobOptions{Duty: 0.05}, res) // the real clock
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.Next(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a batch: the pause would be 19x it
	cancel()
	err := p.Next(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v, want context.Canceled", err)
	}
	if res.Paused <= 0 {
		t.Fatalf("paused %s: want the pause counted", res.Paused)
	}
}
