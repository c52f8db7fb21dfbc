package controller

import (
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/tenant"
)

// TestMoveThrottle: a running move's progress is written at most once per
// interval, and only when it changed since the last write.
func TestMoveThrottle(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := &moveThrottle{every: 10 * time.Second, last: start}
	p := func(copied int64) tenant.MoveProgress { return tenant.MoveProgress{Copied: copied, Total: 100} }
	steps := []struct {
		after time.Duration
		p     tenant.MoveProgress
		want  bool
	}{
		{1 * time.Second, p(5), false},   // too soon after the Running write
		{9 * time.Second, p(40), false},  // still too soon
		{10 * time.Second, p(41), true},  // an interval since Running
		{11 * time.Second, p(50), false}, // too soon after that write
		{20 * time.Second, p(41), false}, // unchanged: nothing to write
		{21 * time.Second, p(60), true},  // changed, an interval since
		{40 * time.Second, p(60), false}, // unchanged, however late
		{41 * time.Second, tenant.MoveProgress{Copied: 60, Total: 120}, true},
	}
	for i, s := range steps {
		if got := th.due(start.Add(s.after), s.p); got != s.want {
			t.Errorf("step %d (+%s, %+v): due = %v, want %v", i, s.after, s.p, got, s.want)
		}
	}
}
