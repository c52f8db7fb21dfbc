package memory

// TEMPORARY: signatures of the engine while it is being implemented in a
// separate worktree. Every method is replaced by the real implementation.

import (
	"context"
	"errors"
	"net/http"
)

var errPending = errors.New("memory engine: not implemented yet")

// Store is one tenant's memory engine.
type Store struct{ cfg Config }

// New returns a Store for cfg.
func New(cfg Config) (*Store, error) {
	if err := validateConfig(&cfg); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg}, nil
}

// Close flushes pending access statistics. It does not close the pool.
func (s *Store) Close() {}

// Policy returns the policy the store enforces.
func (s *Store) Policy() Policy { return s.cfg.Policy }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.cfg.Pool.Ping(ctx) }

// Add stores one memory with two-threshold dedup.
func (s *Store) Add(ctx context.Context, req AddRequest) (*AddResult, error) { return nil, errPending }

// AddBatch validates every item first (all or nothing), then adds them in order.
func (s *Store) AddBatch(ctx context.Context, reqs []AddRequest) ([]AddResult, error) {
	return nil, errPending
}

// Extract asks the LLM for durable facts in a conversation and adds them.
func (s *Store) Extract(ctx context.Context, req ExtractRequest) ([]AddResult, error) {
	return nil, errPending
}

// Search returns the owner's top-K active memories for a query.
func (s *Store) Search(ctx context.Context, req SearchRequest) ([]SearchHit, error) {
	return nil, errPending
}

// Get returns one memory of owner.
func (s *Store) Get(ctx context.Context, owner, id string) (*Memory, error) { return nil, errPending }

// List pages through owner's memories.
func (s *Store) List(ctx context.Context, req ListRequest) (*ListPage, error) { return nil, errPending }

// Update changes fields of one memory.
func (s *Store) Update(ctx context.Context, req UpdateRequest) (*Memory, error) {
	return nil, errPending
}

// Delete soft-deletes one memory.
func (s *Store) Delete(ctx context.Context, owner, id string, source Source) error { return errPending }

// Supersede marks oldID as superseded by newID (both of owner).
func (s *Store) Supersede(ctx context.Context, owner, oldID, newID string, source Source) (*Memory, error) {
	return nil, errPending
}

// History returns the mutations of one memory, oldest first.
func (s *Store) History(ctx context.Context, owner, id string) ([]HistoryEntry, error) {
	return nil, errPending
}

// EraseOwner hard-deletes everything of owner, history included.
func (s *Store) EraseOwner(ctx context.Context, owner string) (*EraseResult, error) {
	return nil, errPending
}

// Context renders owner's memories for a prompt within a token budget.
func (s *Store) Context(ctx context.Context, req ContextRequest) (*ContextResult, error) {
	return nil, errPending
}

// ActiveCount counts owner's active memories.
func (s *Store) ActiveCount(ctx context.Context, owner string) (int64, error) { return 0, errPending }

// RunJob runs one maintenance operation (OpDecay, OpExpire, OpPurge, OpCompact).
func (s *Store) RunJob(ctx context.Context, op string, opts JobOptions) (*JobResult, error) {
	return nil, errPending
}

// WithJobLock runs fn holding the tenant's maintenance lock; ErrLocked when
// another run holds it.
func (s *Store) WithJobLock(ctx context.Context, fn func(context.Context) error) error {
	return errPending
}

// NewEmbedder returns the embedder of cfg; apiKey is used by the openai provider.
func NewEmbedder(cfg EmbeddingConfig, apiKey string, client *http.Client) (Embedder, error) {
	return nil, errPending
}

// NewLLM returns an OpenAI-compatible chat client.
func NewLLM(cfg LLMConfig, apiKey string, client *http.Client) LLM { return nil }
