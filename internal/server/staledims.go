package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// staleDimensionsError is a request of a pod whose embedder no longer
// makes vectors of the tenant's size: a re-embed switched the dimensions
// and the rollout has not yet replaced this pod. The service answers 503
// with Retry-After, as for a pod of the old embedder at the same size
// (memory's SQLSTATE EG029), so the client's retry reaches a new pod;
// before, it answered 500 (review 13, M1).
type staleDimensionsError struct {
	tenant, pod int
	err         error
}

func (e *staleDimensionsError) Error() string {
	return fmt.Sprintf("the tenant's vectors have %d dimensions, this pod's embedder makes %d: %v", e.tenant, e.pod, e.err)
}

func (e *staleDimensionsError) Unwrap() error { return e.err }

// staleDimensions recognises err as a stale pod's (staleDimensionsError)
// by asking the database the tenant's vector size after a data exception,
// the error pgvector raises for vectors of different sizes; any other
// error is returned as it is. The answer is kept for staleDimensionsFor
// (a flood of failing requests reads the catalog once per period), and a
// mismatch is logged at error level once per size pair: a rollout ends it
// within minutes, a permanent one (a pod pinned to another embedder, a
// config edited by hand) must reach the platform team (review 16).
func (s *Server) staleDimensions(ctx context.Context, err error) error {
	if s.store == nil || !memory.IsDataException(err) {
		return err
	}
	if tenant, own, stale := s.dims.answer(ctx, s.store.StaleDimensions, s.logger); stale {
		return &staleDimensionsError{tenant: tenant, pod: own, err: err}
	}
	return err
}

// staleDimensionsAsk bounds the question staleDimensions asks.
const staleDimensionsAsk = 2 * time.Second

// staleDimensionsFor is how long an answer to it is kept: a rollout
// replaces a stale pod in minutes, so a few seconds change little.
const staleDimensionsFor = 5 * time.Second

// staleDimensionsLogged bounds the size pairs remembered as logged.
const staleDimensionsLogged = 16

// staleDims is the last answer to the tenant's vector size question and
// the size pairs already logged.
type staleDims struct {
	mu          sync.Mutex
	askedAt     time.Time
	tenant, own int
	stale       bool
	asks        int // catalog reads (the tests count them)
	logged      map[[2]int]bool
}

// answer returns the kept answer, or asks (one request at a time: the
// others wait for that answer rather than ask too) and logs a mismatch
// not logged before.
func (d *staleDims) answer(ctx context.Context, ask func(context.Context) (int, int, bool), logger *slog.Logger) (tenant, own int, stale bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.asks > 0 && time.Since(d.askedAt) < staleDimensionsFor {
		return d.tenant, d.own, d.stale
	}
	// Asked even when the request's own context ended: the answer is
	// about to be written; bounded on its own.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), staleDimensionsAsk)
	defer cancel()
	d.tenant, d.own, d.stale = ask(actx)
	d.askedAt = time.Now()
	d.asks++
	pair := [2]int{d.tenant, d.own}
	if d.stale && !d.logged[pair] {
		if d.logged == nil || len(d.logged) >= staleDimensionsLogged {
			d.logged = map[[2]int]bool{}
		}
		d.logged[pair] = true
		pod, _ := os.Hostname()
		logger.Error("this pod's embedder makes vectors of another size than the tenant's: its adds and searches answer 503 until a pod with the tenant's embedder replaces it",
			"tenant_dimensions", d.tenant, "embedder_dimensions", d.own, "pod", pod)
	}
	return d.tenant, d.own, d.stale
}
