package pg

import (
	"strconv"
	"time"
)

// Defaults of SessionSettings: what a session of the memory service gets
// when nothing else is configured. The jobs use a longer statement timeout
// (internal/jobrun), since one of their batches may legitimately take longer
// than an API request.
const (
	DefaultLockTimeout      = 5 * time.Second
	DefaultStatementTimeout = 30 * time.Second
	// DefaultJobStatementTimeout is the statement timeout of `manager job`:
	// its batches are bounded, but a batch of a large tenant (or the VACUUM
	// after compaction) takes longer than an API request.
	DefaultJobStatementTimeout = 5 * time.Minute
)

// SessionSettings are set on every database session the engine opens, as
// connection startup parameters, so they hold from the first statement on
// and no code path can forget them. Without lock_timeout a session that
// waits for a lock held by a stuck or hostile session waits forever; without
// statement_timeout one runaway query holds its connection (and its locks)
// for as long as it runs.
type SessionSettings struct {
	// LockTimeout bounds every wait for a lock (PostgreSQL lock_timeout);
	// zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// StatementTimeout bounds every statement (PostgreSQL
	// statement_timeout); zero means DefaultStatementTimeout.
	StatementTimeout time.Duration
	// AsynchronousCommit sets synchronous_commit=off: a commit returns
	// before its WAL is flushed, so a crash of PostgreSQL loses the writes
	// acknowledged in roughly the last 3 × wal_writer_delay (~600 ms by
	// default). Only a runtime that opts out explicitly
	// (spec.database.synchronousCommit: "off") sets it; otherwise every
	// session commits synchronously whatever the server's default is.
	AsynchronousCommit bool
	// Embedder names the embedder this session's vectors are made with
	// (reembed.Embedder's String), as engram.embedder: after a re-embed
	// the tenant's guard trigger refuses a session naming another one
	// (SQLStateWrongEmbedder). Empty: not set (a session writing no vector).
	Embedder string
}

// WithDefaults fills the zero fields: no session runs without both timeouts.
func (s SessionSettings) WithDefaults() SessionSettings {
	if s.LockTimeout <= 0 {
		s.LockTimeout = DefaultLockTimeout
	}
	if s.StatementTimeout <= 0 {
		s.StatementTimeout = DefaultStatementTimeout
	}
	return s
}

// Apply writes the settings into a connection's startup parameters. They
// override the same settings given in the URL or on the role: the engine's
// guarantees do not depend on how the URL was written.
func (s SessionSettings) Apply(params map[string]string) {
	s = s.WithDefaults()
	params["lock_timeout"] = millis(s.LockTimeout)
	params["statement_timeout"] = millis(s.StatementTimeout)
	params["synchronous_commit"] = "on"
	if s.AsynchronousCommit {
		params["synchronous_commit"] = "off"
	}
	if s.Embedder != "" {
		params["engram.embedder"] = s.Embedder
	}
}

// millis formats d as PostgreSQL milliseconds, at least 1 (0 would turn the
// timeout off).
func millis(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}
