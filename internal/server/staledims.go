package server

import (
	"context"
	"fmt"
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
// error is returned as it is.
func (s *Server) staleDimensions(ctx context.Context, err error) error {
	if s.store == nil || !memory.IsDataException(err) {
		return err
	}
	// Asked even when the request's own context ended: the answer is
	// about to be written; bounded on its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), staleDimensionsAsk)
	defer cancel()
	if tenant, own, stale := s.store.StaleDimensions(ctx); stale {
		return &staleDimensionsError{tenant: tenant, pod: own, err: err}
	}
	return err
}

// staleDimensionsAsk bounds the question staleDimensions asks.
const staleDimensionsAsk = 2 * time.Second
