package memory

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
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
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w: %v", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
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

// lockKeys maps (scope, name) to the two int4 keys of pg_advisory_lock.
func lockKeys(scope, name string) (int32, int32) {
	return hash32(scope), hash32(name)
}

func hash32(s string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int32(h.Sum32())
}

// JobLockKeys returns the keys of the tenant's maintenance lock,
// pg_try_advisory_lock(k1, k2), held by WithJobLock for a whole run.
func JobLockKeys(schema string) (int32, int32) { return lockKeys("engram:job", schema) }
