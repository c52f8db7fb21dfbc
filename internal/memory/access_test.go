package memory

import (
	"testing"
	"time"
)

func TestDuePendingThrottles(t *testing.T) {
	now := time.Now()
	pending := map[string]int{"a": 2, "b": 1}
	written := map[string]time.Time{"b": now.Add(-10 * time.Second)}
	due := duePending(pending, written, now)
	if due["a"] != 2 || len(due) != 1 {
		t.Fatalf("due = %v, want only a (b was written 10 s ago)", due)
	}
	if pending["b"] != 1 || written["a"] != now {
		t.Fatalf("pending %v written %v", pending, written)
	}
	pending["b"]++ // accesses add up while throttled
	due = duePending(pending, written, now.Add(accessThrottle))
	if due["b"] != 2 || len(pending) != 0 {
		t.Fatalf("after the throttle: due %v pending %v", due, pending)
	}
}
