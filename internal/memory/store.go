// Package memory is the memory engine of Engram: per-tenant memories in
// PostgreSQL + pgvector with two-threshold dedup, exact per-owner search,
// decay computed at query time, and the maintenance jobs. It has no
// Kubernetes imports; the service and the jobs call it.
package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// Config is what a Store needs.
type Config struct {
	// Pool connects as the tenant's login role; open it with NewPool so the
	// vector type is registered on every connection.
	Pool *pgxpool.Pool
	// Schema is the tenant schema (provisioned by internal/tenant).
	Schema   string
	Policy   Policy
	Embedder Embedder
	// LLM is optional: without it the arbitration band inserts and Extract
	// returns ErrNoLLM.
	LLM LLM
	// LLMTimeout bounds one arbiter or extraction call; default 10s.
	LLMTimeout time.Duration
	Logger     *slog.Logger
}

// NewPool opens a pgx pool on url with pgvector's types registered on each
// connection. maxConns <= 0 keeps pgx's default.
func NewPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error { return pgxvec.RegisterTypes(ctx, c) }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening database pool: %w", err)
	}
	return pool, nil
}

// validateConfig checks a Config before New uses it.
func validateConfig(cfg *Config) error {
	if cfg.Pool == nil {
		return errors.New("memory: Config.Pool is required")
	}
	if cfg.Embedder == nil {
		return errors.New("memory: Config.Embedder is required")
	}
	if cfg.Schema == "" {
		return errors.New("memory: Config.Schema is required")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return fmt.Errorf("memory: invalid policy: %w", err)
	}
	if cfg.LLMTimeout <= 0 {
		cfg.LLMTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
