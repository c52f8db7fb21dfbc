package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// StoreParams is what Open needs to build a tenant's memory store.
type StoreParams struct {
	Config          *memory.ServiceConfig
	DatabaseURL     string
	EmbeddingAPIKey string
	// ReembedAPIKey is the key of the config's reembed.next embedder.
	ReembedAPIKey string
	// CountDualWrite, when set, counts every dual write's outcome during a
	// re-embed (memory.NextEmbedder.Count).
	CountDualWrite func(outcome string)
	LLMAPIKey      string
	// RerankAPIKey is the key of the policy's reranker (Bearer), if any.
	RerankAPIKey string
	// MaxConns bounds the pool; <= 0 keeps pgx's default.
	MaxConns int32
	// Session holds the lock and statement timeouts of every session;
	// zero fields take the service's defaults (memory.DefaultLockTimeout,
	// memory.DefaultStatementTimeout).
	Session memory.SessionSettings
	// JobLeaseTTL is the maintenance lease of `manager job`; zero keeps
	// the engine's default.
	JobLeaseTTL time.Duration
	// HTTPClient talks to the embedding and LLM APIs; nil means a client
	// with a 30 s timeout.
	HTTPClient *http.Client
	// WrapEmbedder and WrapLLM, when set, decorate the embedder and the LLM
	// (the service uses them to record metrics).
	WrapEmbedder func(memory.Embedder) memory.Embedder
	WrapLLM      func(memory.LLM) memory.LLM
	// WrapReranker, when set, decorates the reranker (metrics).
	WrapReranker func(memory.Reranker) memory.Reranker
	Logger       *slog.Logger
}

// Tenant is an opened store with the pool under it.
type Tenant struct {
	Pool  *pgxpool.Pool
	Store *memory.Store
	// HasLLM reports whether an LLM is configured.
	HasLLM bool
}

// Close closes the store, then the pool.
func (t *Tenant) Close() {
	t.Store.Close()
	t.Pool.Close()
}

// DefaultUpstreamTimeout bounds one call to the embedding or LLM API when
// StoreParams.HTTPClient is nil.
const DefaultUpstreamTimeout = 30 * time.Second

// Open opens the pool (lazily: no connection is made yet, so a service can
// start while the database is down and report it through /readyz), the
// embedder, the optional LLM, and the store.
func Open(ctx context.Context, p StoreParams) (*Tenant, error) {
	if p.Config == nil {
		return nil, errors.New("no service config")
	}
	if p.DatabaseURL == "" {
		return nil, fmt.Errorf("the database URL is not set: export %s (the uri of the <runtime>-db Secret)", naming.EnvDatabaseURL)
	}
	client := p.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultUpstreamTimeout}
	}
	emb, err := memory.NewEmbedder(p.Config.Embedding, p.EmbeddingAPIKey, client)
	if err != nil {
		return nil, fmt.Errorf("creating the %s embedder: %w", p.Config.Embedding.Provider, err)
	}
	if p.WrapEmbedder != nil {
		emb = p.WrapEmbedder(emb)
	}
	var llm memory.LLM
	var llmTimeout time.Duration
	if p.Config.LLM != nil {
		if llmTimeout, err = p.Config.LLM.TimeoutDuration(); err != nil {
			return nil, err
		}
		llmClient := client
		if p.HTTPClient == nil && llmTimeout > DefaultUpstreamTimeout {
			// The default client would cut a call the runtime allows longer.
			llmClient = &http.Client{Timeout: llmTimeout}
		}
		llm = memory.NewLLM(*p.Config.LLM, p.LLMAPIKey, llmClient)
		if llm != nil && p.WrapLLM != nil {
			llm = p.WrapLLM(llm)
		}
	}
	reranker := newReranker(p, client)
	next, err := newNext(p, client)
	if err != nil {
		return nil, err
	}
	// Durability is the runtime's choice (its config), never the server's default.
	sess := p.Session
	sess.AsynchronousCommit = p.Config.AsynchronousCommit
	// The embedder the tenant's re-embed guard checks writes of vectors
	// against (memory.ReembedSwitch).
	sess.Embedder = memory.ReembedNamed(p.Config.Embedding.Provider, p.Config.Embedding.Model, p.Config.Embedding.Dimensions).String()
	pool, err := memory.NewPool(ctx, p.DatabaseURL, p.MaxConns, sess)
	if err != nil {
		// pgx quotes the URL in parse errors and masks the password only on
		// a best-effort basis; never let it reach a log.
		return nil, fmt.Errorf("%s is not a valid PostgreSQL connection URL (value not shown: it may hold a password)", naming.EnvDatabaseURL)
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	store, err := memory.New(memory.Config{
		Pool:        pool,
		Schema:      p.Config.Schema,
		Policy:      p.Config.Policy,
		Embedder:    emb,
		LLM:         llm,
		LLMTimeout:  llmTimeout,
		JobLeaseTTL: p.JobLeaseTTL,
		Logger:      logger,
		// The runtime's byte cap on answers (spec.service.limits).
		MaxResponseBytes: p.Config.MaxResponseBytes,
		Reranker:         reranker,
		Next:             next,
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("creating the memory store: %w", err)
	}
	return &Tenant{Pool: pool, Store: store, HasLLM: llm != nil}, nil
}

// newNext is the embedder the config's re-embed fills toward, nil without
// one: while the tenant fills toward it, the store dual-writes.
func newNext(p StoreParams, client *http.Client) (*memory.NextEmbedder, error) {
	r := p.Config.Reembed
	if r == nil {
		return nil, nil
	}
	emb, err := memory.NewEmbedder(r.Next, p.ReembedAPIKey, client)
	if err != nil {
		return nil, fmt.Errorf("creating the %s embedder of the re-embed: %w", r.Next.Provider, err)
	}
	timeout, err := r.TimeoutDuration()
	if err != nil {
		return nil, err
	}
	return &memory.NextEmbedder{ID: memory.ReembedNamed(r.Next.Provider, r.Next.Model, r.Next.Dimensions), Embedder: emb,
		Timeout: timeout, Count: p.CountDualWrite}, nil
}

// newReranker is the client of the policy's reranker, nil without one. The
// engine bounds each call with reranking.timeout.
func newReranker(p StoreParams, client *http.Client) memory.Reranker {
	r := p.Config.Policy.Reranking
	if r == nil {
		return nil
	}
	rr := memory.NewReranker(memory.RerankConfig{Endpoint: r.Endpoint, Model: r.Model, API: r.API}, p.RerankAPIKey, client)
	if p.WrapReranker != nil {
		rr = p.WrapReranker(rr)
	}
	return rr
}
