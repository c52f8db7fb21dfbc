package core

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// TestDBErrKeepsTheCause: DBErr marks busy and unavailable database errors
// with ErrBusy and ErrUnavailable and keeps the PostgreSQL error in the
// chain, so errors.As still finds its SQLSTATE (and the message its text).
func TestDBErrKeepsTheCause(t *testing.T) {
	cases := []struct {
		code              string
		busy, unavailable bool
	}{
		{"55P03", true, true},  // lock_not_available (lock_timeout)
		{"40P01", true, true},  // deadlock_detected
		{"08006", false, true}, // connection_failure
		{"53300", false, true}, // too_many_connections
		{"23505", false, false},
	}
	for _, c := range cases {
		cause := &pgconn.PgError{Code: c.code, Message: "cause " + c.code}
		err := DBErr("adding a memory", cause)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr != cause {
			t.Errorf("%s: errors.As does not find the *pgconn.PgError in %v", c.code, err)
		}
		if errors.Is(err, ErrBusy) != c.busy || errors.Is(err, ErrUnavailable) != c.unavailable {
			t.Errorf("%s: %v: ErrBusy %v (want %v), ErrUnavailable %v (want %v)", c.code, err,
				errors.Is(err, ErrBusy), c.busy, errors.Is(err, ErrUnavailable), c.unavailable)
		}
		if !strings.HasPrefix(err.Error(), "adding a memory: ") || !strings.Contains(err.Error(), "cause "+c.code) {
			t.Errorf("%s: message %q lacks the operation or the cause", c.code, err)
		}
	}
	if DBErr("anything", nil) != nil {
		t.Error("DBErr(nil) is not nil")
	}
}

// TestIsUnavailable: what the service answers 503 for, by type and
// SQLSTATE (TestConnectionLossIsUnavailable gets the same errors from real
// broken connections).
func TestIsUnavailable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{ErrUnavailable, true},
		{DBErr("reading", &pgconn.PgError{Code: "57P01"}), true}, // admin_shutdown
		{&pgconn.PgError{Code: "57P02"}, true},                   // crash_shutdown
		{&pgconn.PgError{Code: "57P03"}, true},                   // cannot_connect_now: starting up, in recovery
		{&pgconn.PgError{Code: "08006"}, true},                   // connection_failure
		{&pgconn.PgError{Code: "53300"}, true},                   // too_many_connections
		{&pgconn.PgError{Code: "25006"}, true},                   // read_only_sql_transaction: a standby
		{&pgconn.ConnectError{}, true},
		{fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), true}, // a backend that exited without a word
		{io.EOF, true},
		{fmt.Errorf("querying: %w", pgconn.ErrConnClosed), true},
		{puddle.ErrClosedPool, true},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{errors.New("closed pool"), false}, // by type, never by message
		{errors.New("something else"), false},
	}
	for _, c := range cases {
		if got := IsUnavailable(c.err); got != c.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
