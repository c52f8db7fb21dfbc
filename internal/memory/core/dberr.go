package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/engram-dev/engram/internal/memory/pg"
)

// DBErr wraps a database error with what was being done, and marks the ones
// that mean "the database cannot be reached" with ErrUnavailable so the
// service answers 503 instead of 500.
func DBErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if pg.IsBusy(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrBusy, err)
	}
	if pg.IsUnreachable(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// IsUnavailable reports whether err means the database cannot be used right
// now: the engine said so (ErrUnavailable), connecting failed, the
// connection broke, the server is shutting down, restarting, in recovery
// or out of connections. The service answers 503 for these, the jobs fail
// their run with the cause, the operator retries with backoff.
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || pg.IsUnreachable(err)
}
