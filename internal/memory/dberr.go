package memory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// dbErr wraps a database error with what was being done, and marks the ones
// that mean "the database cannot be reached" with ErrUnavailable so the
// service answers 503 instead of 500.
func (s *Store) dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if isBusy(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrBusy, err)
	}
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isBusy reports the errors that a retry may cure: 55P03 lock_not_available
// (lock_timeout), 57014 query_canceled (statement_timeout; a canceled
// context is caught before), 40P01 deadlock_detected, 40001
// serialization_failure.
func isBusy(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "55P03", "57014", "40P01", "40001":
		return true
	}
	return false
}

// IsUnavailable reports whether err means the database cannot be used right
// now: the engine said so (ErrUnavailable), connecting failed, the
// connection broke, the server is shutting down or out of connections. The
// service answers 503 for these.
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || isUnavailable(err)
}

func isUnavailable(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exception; 57P01-03: admin/crash shutdown, cannot
		// connect now; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P0") || pgErr.Code == "53300"
	}
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "closed pool")
}
