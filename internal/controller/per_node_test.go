package controller

import "testing"

// TestPerNode: get makes a node's state once and keeps it, swap returns
// the previous state, and forget drops it so the next get makes a new one.
func TestPerNode(t *testing.T) {
	var s perNode[*int]
	made := 0
	mk := func() *int { made++; v := made; return &v }
	if got := s.get("a", nil); got != nil {
		t.Fatalf("get without mk on an empty state = %v; want nil", got)
	}
	first := s.get("a", mk)
	if again := s.get("a", mk); again != first || made != 1 {
		t.Fatalf("the second get made a new state (made %d times)", made)
	}
	var said perNode[bool]
	if said.swap("a", true) || !said.swap("a", true) {
		t.Fatal("swap does not return the previous value")
	}
	s.forget("a")
	if s.get("a", mk) == first || made != 2 {
		t.Fatalf("after forget, get kept the old state (made %d times)", made)
	}
}
