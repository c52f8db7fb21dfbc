package core

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory/modelapi"
	"github.com/engram-dev/engram/internal/memory/policy"
	"github.com/engram-dev/engram/internal/memory/textguard"
)

// State is what every part of one tenant's engine shares: the pool, the
// resolved policy, the model clients, the redactor and the bounds. The
// façade (memory.Store) builds it once, validated, and every part holds
// the same pointer, so a part in a package of its own reaches it without
// importing the façade. It is read-only after construction, but for the
// caches that Text and Next point to.
type State struct {
	// Pool connects as the tenant's login role.
	Pool *pgxpool.Pool
	// Schema is the tenant schema.
	Schema string
	// Policy is the policy the engine enforces, its defaults resolved.
	Policy   policy.Policy
	Embedder modelapi.Embedder
	// LLM is nil when the runtime has none.
	LLM modelapi.LLM
	// LLMTimeout bounds one call of the LLM, retries included.
	LLMTimeout time.Duration
	Log        *slog.Logger
	Redactor   *textguard.Redactor
	// MaxBytes is the byte cap of one answer (AnswerCap).
	MaxBytes int
	// Text caches the tenant's text search configuration (TextConfig);
	// nil reads it at every search.
	Text *TextSearch
	// Next is the embedder a re-embed of the tenant fills toward, whose
	// vectors every write adds while it does (dual.go); nil: none known.
	Next *Next
}

// Table is the quoted name of a table of the tenant schema
// ("schema"."name"); identifiers are quoted by pgx, never built from
// user input.
func (s *State) Table(name string) string {
	return pgx.Identifier{s.Schema, name}.Sanitize()
}

// InTx runs fn in a transaction, committing when it returns nil.
func (s *State) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return DBErr("begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return DBErr("commit", err)
	}
	return nil
}

// AnswerCap is the cap of one answer: the store's, or a smaller one a
// caller asks for (the MCP tools, whose results carry the answer twice).
func (s *State) AnswerCap(asked int) int {
	if asked <= 0 || asked > s.MaxBytes {
		return s.MaxBytes
	}
	return asked
}
