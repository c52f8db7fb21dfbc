package server

import (
	"fmt"
	"net/http"
	"sync"
)

// Requests in flight per credential (docs/api.md#limits-and-load). The
// rate limit bounds how many requests a credential starts; it does not
// bound how long each one lasts. A client that trickles its body or never
// reads its answer makes every request last, so 64 requests a minute could
// hold all --max-inflight slots of the service and refuse every other
// credential. Each credential therefore has at most
// --max-inflight-per-credential requests in flight, from admission (after
// authentication and the rate limit) to the end, body reading included.

// Label value of engram_rate_limited_total for this limit.
const limitClassInflight = "inflight"

// credentialSlots counts the requests in flight of each credential. A nil
// *credentialSlots admits everything (the limit is off). The map holds only
// credentials with a request in flight, so it is bounded by the requests
// being served.
type credentialSlots struct {
	max  int
	mu   sync.Mutex
	held map[string]int
}

func newCredentialSlots(max int) *credentialSlots {
	if max <= 0 {
		return nil
	}
	return &credentialSlots{max: max, held: map[string]int{}}
}

// take takes one of key's slots; false when all are held.
func (c *credentialSlots) take(key string) bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[key] >= c.max {
		return false
	}
	c.held[key]++
	return true
}

// release gives back a slot take gave.
func (c *credentialSlots) release(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[key] <= 1 {
		delete(c.held, key)
		return
	}
	c.held[key]--
}

// inflightProblem is the 429 of a credential whose slots are all held:
// one of its requests ends soon (at most the request timeout).
func inflightProblem(max int) *Problem {
	p := newProblem(probRateLimited, fmt.Sprintf("this token has %d requests in flight already, its limit; "+
		"retry when one has finished (Retry-After), or send fewer at once", max))
	p.retryAfter = 1
	return p
}

// admitInflight takes a slot of the request's credential, or returns the
// 429 of a credential whose slots are all held. release gives the slot back.
func (s *Server) admitInflight(r *http.Request) (release func(), p *Problem) {
	key := bucketKey(credential(r))
	if !s.credentialSlots.take(key) {
		s.metrics.rateLimited.WithLabelValues(limitClassInflight, limitRejected).Inc()
		return nil, inflightProblem(s.credentialSlots.max)
	}
	return func() { s.credentialSlots.release(key) }, nil
}
