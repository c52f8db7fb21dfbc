package server

import "fmt"

// Load shedding: at most --max-inflight API requests run their handler at
// once, and at most as many read their body beforehand (requestbody.go).
// More are answered 429 at once instead of queueing, so a burst cannot
// exhaust memory or the database pool. nil channels: no limit.

func newSlots(n int) chan struct{} {
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, n)
}

// tryTake takes a slot of slots without waiting; false when all are held.
func tryTake(slots chan struct{}) bool {
	if slots == nil {
		return true
	}
	select {
	case slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func give(slots chan struct{}) {
	if slots != nil {
		<-slots
	}
}

func (s *Server) takeReader() bool { return tryTake(s.readers) }
func (s *Server) releaseReader()   { give(s.readers) }

// shedProblem is the 429 of a full service, counted.
func (s *Server) shedProblem() *Problem {
	s.metrics.shed.Inc()
	return newProblem(probOverloaded, fmt.Sprintf("%d requests are in flight already; retry after a short pause", cap(s.slots)))
}
