package pg

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// SQLStateWrongEmbedder is raised by a tenant's re-embed guard trigger
// (reembed.Switch) when a session's engram.embedder is not the embedder
// of the tenant's vectors: a pod of the old embedder after the switch,
// which the rollout replaces; the service answers 503 with Retry-After.
const SQLStateWrongEmbedder = "EG029"

// IsBusy reports the errors that a retry may cure: 55P03 lock_not_available
// (lock_timeout), 57014 query_canceled (statement_timeout; a canceled
// context is caught before), 40P01 deadlock_detected, 40001
// serialization_failure, and SQLStateWrongEmbedder (a retry reaches a pod
// of the new embedder).
func IsBusy(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "55P03", "57014", "40P01", "40001", SQLStateWrongEmbedder:
		return true
	}
	return false
}

// IsUnreachable reports whether err means the database cannot be used
// right now. It classifies by type and SQLSTATE, never by message:
//   - *pgconn.ConnectError: connecting failed (refused, unreachable, or the
//     server answered 57P03 "the database system is starting up / in
//     recovery mode / shutting down");
//   - net.Error: the socket failed (reset, broken pipe, timeout);
//   - io.EOF, io.ErrUnexpectedEOF: the server closed the connection without
//     an error message. pgx returns them bare: a backend waiting for a lock
//     when the postmaster is killed exits at once and says nothing (found
//     by the fault suite: a pipelined add answered 500);
//   - pgconn.ErrConnClosed, or an error pgx marks safe to retry: a
//     connection pgx closed after one of the above, or nothing was sent;
//   - puddle.ErrClosedPool: the pool is closed (the process is stopping);
//   - PostgreSQL errors of class 08 (connection exception), 57P01-57P05
//     (admin or crash shutdown, cannot connect now, database dropped, idle
//     session timeout), 53300 (too many connections) and 25006 (read-only
//     transaction: the server is a standby, in recovery, e.g. during a
//     failover).
func IsUnreachable(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true // whatever the server said while connecting (a rotated password included: retry)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableCode(pgErr.Code) // the server answered: only these mean it cannot serve
	}
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) ||
		errors.Is(err, puddle.ErrClosedPool)
}

// unavailableCode reports the SQLSTATEs of IsUnreachable.
func unavailableCode(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "57P04", "57P05", "53300", "25006":
		return true
	}
	return strings.HasPrefix(code, "08")
}

// IsDataException reports SQLSTATE 22000 (data_exception): what pgvector
// raises comparing or storing vectors of different dimensions (and for
// NaN or infinite values, which the engine never sends).
func IsDataException(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "22000"
}
