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

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/longterm"
	"github.com/engram-dev/engram/internal/memory/write"
	"github.com/engram-dev/engram/internal/tenant"
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
	// Reranker is optional: with it and the policy's reranking section,
	// vector and hybrid search reorder their top candidates (rerank.go).
	Reranker Reranker
	// Next, while the tenant re-embeds toward it, makes every write of a
	// vector write the next embedder's too (dual writes); nil: none.
	Next   *NextEmbedder
	Logger *slog.Logger
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
	// core is the state every part of the engine shares (the pool, the
	// policy, the model clients, the redactor, the byte cap): the parts in
	// packages of their own (conversation) hold the same pointer.
	core *core.State
	// conv is conversation memory (internal/memory/conversation), over core.
	conv *conversation.Store
	// lt is long-term memory's documents, episodes and extraction
	// (internal/memory/longterm), over core, conv and w.
	lt *longterm.Store
	// w is the write path of memories (internal/memory/write), over core.
	w      *write.Store
	access *accessRecorder
	sql    queries
	// halfLives are the categories' half-lives in seconds, as SQL array
	// parameters for the decay expression (decayNames[i] -> decaySeconds[i]).
	decayNames   []string
	decaySeconds []float64
	leaseTTL     time.Duration // of the maintenance lease (WithJobLock)
	// reranker is nil unless the policy has reranking and Config a
	// Reranker; rerankTimeout bounds one call.
	reranker      Reranker
	rerankTimeout time.Duration
	// afterCompactBatch, when set (by tests), runs after each batch of
	// compaction, outside any transaction.
	afterCompactBatch func(owner string)
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
		core: &core.State{
			Pool:       cfg.Pool,
			Schema:     cfg.Schema,
			Policy:     cfg.Policy,
			Embedder:   cfg.Embedder,
			LLM:        cfg.LLM,
			LLMTimeout: cfg.LLMTimeout,
			Log:        cfg.Logger,
			Redactor:   red,
			MaxBytes:   cfg.MaxResponseBytes,
			Text:       &core.TextSearch{},
			Next:       cfg.Next.core(),
		},
		sql:      newQueries(cfg.Schema),
		leaseTTL: cfg.JobLeaseTTL,
	}
	s.decayNames, s.decaySeconds = write.DecayParams(s.core)
	if r := cfg.Policy.Reranking; r != nil && cfg.Reranker != nil {
		s.reranker = cfg.Reranker
		if s.rerankTimeout, err = r.TimeoutDuration(); err != nil {
			s.rerankTimeout = DefaultRerankTimeout // Validate refused such a policy already
		}
	}
	// Conversation memory first: long-term memory summarizes its sessions.
	// The write path first: long-term memory's extraction writes through it.
	s.w = write.New(s.core, tenant.OwnerVectorsMaxDims)
	s.conv = conversation.New(s.core, longterm.Pins(s.core))
	s.lt = longterm.New(s.core, s.conv, s.w)
	s.access = newAccessRecorder(s)
	return s, nil
}

// Close flushes pending access statistics (bounded by a few seconds). It
// does not close the pool, which belongs to the caller.
func (s *Store) Close() { s.access.close() }

// Policy returns the policy the store enforces.
func (s *Store) Policy() Policy { return s.core.Policy }

// LLMTimeout returns the bound of one arbiter or extraction call.
func (s *Store) LLMTimeout() time.Duration { return s.core.LLMTimeout }

// Schema returns the tenant schema.
func (s *Store) Schema() string { return s.core.Schema }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.core.Pool.Ping(ctx); err != nil {
		return core.DBErr("ping", err)
	}
	return nil
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.core.InTx(ctx, fn)
}
