package memory

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory/pg"
)

// The PostgreSQL helpers (pool, database session settings, error
// classification) live in internal/memory/pg; these names keep the
// façade's API.

// SessionSettings are set on every database session the engine opens
// (pg.SessionSettings: lock and statement timeouts, synchronous commit).
type SessionSettings = pg.SessionSettings

// Defaults of SessionSettings.
const (
	DefaultLockTimeout         = pg.DefaultLockTimeout
	DefaultStatementTimeout    = pg.DefaultStatementTimeout
	DefaultJobStatementTimeout = pg.DefaultJobStatementTimeout
)

// NewPool opens a pgx pool on url with pgvector's types registered and
// sess's timeouts set on every session (pg.NewPool).
func NewPool(ctx context.Context, url string, maxConns int32, sess SessionSettings) (*pgxpool.Pool, error) {
	return pg.NewPool(ctx, url, maxConns, sess)
}
