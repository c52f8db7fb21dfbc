package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMoveCopyStepsSplit: the steps Copy reports are timed until the next
// one, the first from the copy's start, and those naming an index are the
// index rebuild, the rest the bulk copy.
func TestMoveCopyStepsSplit(t *testing.T) {
	var c stepClock
	t0 := time.Now().Add(-10 * time.Second)
	c.start(t0)
	c.saw("copy memories")
	c.first["copy memories"] = t0.Add(time.Second) // reported a second after the start
	c.saw("copy memory_history")
	c.first["copy memory_history"] = t0.Add(4 * time.Second)
	c.saw("copy memories") // seen again: still one step
	c.saw("")
	c.saw("rebuild indexes")
	c.first["rebuild indexes"] = t0.Add(6 * time.Second)
	steps := c.finish(t0.Add(9 * time.Second))
	if len(steps) != 3 {
		t.Fatalf("steps = %+v, want 3", steps)
	}
	want := []MoveStep{{"copy memories", 4}, {"copy memory_history", 2}, {"rebuild indexes", 3}}
	for i, s := range steps {
		if s != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, s, want[i])
		}
	}
	bulk, index := splitCopySteps(steps)
	if bulk != 6 || index != 3 {
		t.Errorf("bulk %.3f s, index %.3f s; want 6 and 3", bulk, index)
	}
}

// TestMoveTargets: a lost acknowledged write fails the run (Check), and
// so does a move in which no write was acknowledged (the load measured
// nothing); the freeze is a goal, not a check.
func TestMoveTargets(t *testing.T) {
	ok := moveTargets(&MoveReport{Memories: 200_000, WritesAcked: 500, Freeze: MoveFreeze{TotalMs: 4000}})
	if len(ok) != 2 || !ok[0].Met || !ok[0].Check || !ok[1].Met || ok[1].Check {
		t.Errorf("a clean move: %+v", ok)
	}
	lost := moveTargets(&MoveReport{Memories: 200_000, WritesAcked: 500, Lost: 1, Freeze: MoveFreeze{TotalMs: 12_000}})
	if lost[0].Met || !strings.HasPrefix(lost[0].Measured, "1 of 500") || lost[1].Met || lost[1].Gap != 0.2 {
		t.Errorf("a move that lost a write and froze 12 s: %+v", lost)
	}
	if idle := moveTargets(&MoveReport{Memories: 2000}); idle[0].Met || len(idle) != 1 {
		t.Errorf("a move without acknowledged writes: %+v", idle)
	}
	var sb strings.Builder
	moveMarkdown(func(f string, a ...any) { fmt.Fprintf(&sb, f, a...) }, &MoveReport{Memories: 2000, Passes: []MovePass{{Delta: 120, Sec: 0.5}}, Freeze: MoveFreeze{TotalMs: 800}})
	if !strings.Contains(sb.String(), "| **800** |") || !strings.Contains(sb.String(), "120 in 0.5") {
		t.Errorf("markdown lacks the freeze or the passes:\n%s", sb.String())
	}
}
