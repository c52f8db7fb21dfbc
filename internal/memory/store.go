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

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/textguard"
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
	// LLMTimeout bounds one arbiter or extraction call, retries included;
	// default DefaultLLMTimeout.
	LLMTimeout time.Duration
	// JobLeaseTTL is how long the maintenance lease lasts without renewal
	// (WithJobLock renews it every third of that); default 10 min. It must
	// exceed the longest statement of a run, since with a one-connection
	// pool the renewal waits for that statement.
	JobLeaseTTL time.Duration
	// MaxResponseBytes caps the JSON size of every answer carrying
	// conversation text or context (answercap.go); 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int
	Logger           *slog.Logger
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
		cfg.LLMTimeout = DefaultLLMTimeout
	}
	if cfg.JobLeaseTTL <= 0 {
		cfg.JobLeaseTTL = DefaultJobLeaseTTL
	}
	if err := ValidMaxResponseBytes(cfg.MaxResponseBytes); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Store is one tenant's memory engine. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	schema   string
	policy   Policy
	embedder Embedder
	llm      LLM
	timeout  time.Duration
	log      *slog.Logger
	redactor *textguard.Redactor
	access   *accessRecorder
	sql      queries
	// halfLives are the categories' half-lives in seconds, as SQL array
	// parameters for the decay expression (decayNames[i] -> decaySeconds[i]).
	decayNames   []string
	decaySeconds []float64
	leaseTTL     time.Duration // of the maintenance lease (WithJobLock)
	maxBytes     int           // the byte cap of one answer (answercap.go)
	// afterCompactBatch, when set (by tests), runs after each batch of
	// compaction, outside any transaction.
	afterCompactBatch func(owner string)
	// workerAdd: whether the schema has add_memory (Citus, citusadd.go).
	workerAdd workerAddProbe
}

// New returns a Store for cfg. Close it to flush access statistics.
func New(cfg Config) (*Store, error) {
	if err := validateConfig(&cfg); err != nil {
		return nil, err
	}
	cfg.Policy.Conversation = cfg.Policy.Conversation.Resolved()
	cfg.Policy.Limits = cfg.Policy.Limits.WithQuotaDefaults()
	red, err := newRedactor(cfg.Policy.Redaction)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	s := &Store{
		pool:     cfg.Pool,
		schema:   cfg.Schema,
		policy:   cfg.Policy,
		embedder: cfg.Embedder,
		llm:      cfg.LLM,
		timeout:  cfg.LLMTimeout,
		log:      cfg.Logger,
		redactor: red,
		sql:      newQueries(cfg.Schema),
	}
	s.leaseTTL = cfg.JobLeaseTTL
	s.maxBytes = cfg.MaxResponseBytes
	for _, c := range cfg.Policy.Categories {
		s.decayNames = append(s.decayNames, c.Name)
		s.decaySeconds = append(s.decaySeconds, time.Duration(c.HalfLife).Seconds())
	}
	s.access = newAccessRecorder(s)
	return s, nil
}

// Close flushes pending access statistics (bounded by a few seconds). It
// does not close the pool, which belongs to the caller.
func (s *Store) Close() { s.access.close() }

// Policy returns the policy the store enforces.
func (s *Store) Policy() Policy { return s.policy }

// LLMTimeout returns the bound of one arbiter or extraction call.
func (s *Store) LLMTimeout() time.Duration { return s.timeout }

// Schema returns the tenant schema.
func (s *Store) Schema() string { return s.schema }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return core.DBErr("ping", err)
	}
	return nil
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return core.DBErr("begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return core.DBErr("commit", err)
	}
	return nil
}
