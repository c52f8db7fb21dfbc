package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// rawSQL is the same database work as the memory service, issued directly
// through pgx with nothing around it (no HTTP, JSON, validation, redaction,
// access statistics). Its statements are the engine's own: they come from
// the engine's builders (memory.Store.SearchQuery, ContextQuery,
// LockOwnerQuery, NearestQuery, InsertQuery) of a Store on the same schema and policy, so
// the two sides can never drift apart (issue 17 found a hand copy whose
// decay expression had).
type rawSQL struct {
	pool     *pgxpool.Pool
	schema   string
	memories string
	history  string
	embedder memory.Embedder
	policy   memory.Policy
	engine   *memory.Store // query builder only: the raw side never calls its methods that run queries
	url      string        // the login role's URL, for pgbench
}

// newRawSQL is the raw side over the bench tenant's schema (benchSchema).
// newBuiltinRawSQL is newRawSQL with the builtin embedder of the bench's
// dimensions (the service's).
func newBuiltinRawSQL(pool *pgxpool.Pool, policy memory.Policy) (*rawSQL, error) {
	emb, err := memory.NewBuiltinEmbedder(benchDims)
	if err != nil {
		return nil, err
	}
	return newRawSQL(pool, policy, emb)
}

func newRawSQL(pool *pgxpool.Pool, policy memory.Policy, emb memory.Embedder) (*rawSQL, error) {
	schema := benchSchema
	engine, err := memory.New(memory.Config{Pool: pool, Schema: schema, Policy: policy, Embedder: emb})
	if err != nil {
		return nil, fmt.Errorf("building the engine's queries: %w", err)
	}
	return &rawSQL{
		pool: pool, schema: schema, embedder: emb, policy: policy, engine: engine,
		memories: pgx.Identifier{schema, "memories"}.Sanitize(),
		history:  pgx.Identifier{schema, "memory_history"}.Sanitize(),
	}, nil
}

func (r *rawSQL) close() { r.engine.Close() }

func (r *rawSQL) embed(ctx context.Context, text string) ([]float32, error) {
	v, err := r.embedder.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	return v[0], nil
}

// drain reads every row of a query, as a client that uses the result must.
func drain(rows pgx.Rows) (int, error) {
	n := 0
	for rows.Next() {
		if _, err := rows.Values(); err != nil {
			rows.Close()
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// searchSQL is the engine's query of a search in mode (no agent, session
// or category filter) for owner with the query's embedding.
func (r *rawSQL) searchSQL(ctx context.Context, mode memory.SearchMode, owner, query string, k int) (string, []any, error) {
	vec, err := r.embed(ctx, query)
	if err != nil {
		return "", nil, err
	}
	sql, args := r.engine.SearchQuery(memory.SearchRequest{Owner: owner, Query: query, Mode: mode, TopK: k}, vec)
	return sql, args, nil
}

func (r *rawSQL) run(ctx context.Context, sql string, args []any) (int, error) {
	rows, err := r.pool.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return drain(rows)
}

// vectorSearch is the engine's exact per-owner vector search.
func (r *rawSQL) vectorSearch(ctx context.Context, owner, query string, k int) (int, error) {
	sql, args, err := r.searchSQL(ctx, memory.SearchVector, owner, query, k)
	if err != nil {
		return 0, err
	}
	return r.run(ctx, sql, args)
}

// hybridSearch is the engine's hybrid search.
func (r *rawSQL) hybridSearch(ctx context.Context, owner, query string, k int) (int, error) {
	sql, args, err := r.searchSQL(ctx, memory.SearchHybrid, owner, query, k)
	if err != nil {
		return 0, err
	}
	return r.run(ctx, sql, args)
}

// ceiling is the least an exact per-owner top-k must do: the ids of the
// owner's nearest rows on the best access path of the schema (memory.CeilingSQL).
func (r *rawSQL) ceiling(ctx context.Context, owner, query string, k int) (int, error) {
	vec, err := r.embed(ctx, query)
	if err != nil {
		return 0, err
	}
	return r.run(ctx, memory.CeilingSQL(r.schema), []any{owner, pgv.NewVector(vec), k})
}

// ceilingSQL is the ceiling statement with its arguments (for pgbench).
func (r *rawSQL) ceilingSQL(ctx context.Context, owner, query string) (string, []any, error) {
	vec, err := r.embed(ctx, query)
	if err != nil {
		return "", nil, err
	}
	return memory.CeilingSQL(r.schema), []any{owner, pgv.NewVector(vec), topK}, nil
}

// contextBudget is the token budget of the context workload.
const contextBudget = 1000

// contextCandidates is the engine's context candidate query with a query
// text and a budget of contextBudget tokens. Rendering the text from it is
// cheap Go work the raw side skips.
func (r *rawSQL) contextCandidates(ctx context.Context, owner, query string) (int, error) {
	sql, args, err := r.contextSQL(ctx, owner, query)
	if err != nil {
		return 0, err
	}
	return r.run(ctx, sql, args)
}

func (r *rawSQL) contextSQL(ctx context.Context, owner, query string) (string, []any, error) {
	vec, err := r.embed(ctx, query)
	if err != nil {
		return "", nil, err
	}
	sql, args := r.engine.ContextQuery(memory.ContextRequest{Owner: owner, Query: query, MaxTokens: contextBudget}, vec, contextBudget)
	return sql, args, nil
}

// errUnexpectedDuplicate: the add workload writes fresh texts; a neighbour
// above the merge threshold means the generator is broken, not the engine.
var errUnexpectedDuplicate = errors.New("the nearest neighbour is a near-duplicate; the add workload expects fresh texts")

// add is the engine's add path for a fresh text (internal/memory/write/addtx.go):
// one transaction of two round trips, each a pipeline of the engine's own
// statements: BEGIN, the owner's lock (LockOwnerQuery) and the neighbour
// lookup among all non-superseded rows (NearestQuery); then the insert
// with its history row and the owner's row count (InsertQuery) and COMMIT.
func (r *rawSQL) add(ctx context.Context, owner string, it item) error {
	vec, err := r.embed(ctx, it.Content)
	if err != nil {
		return err
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}()
	b := &pgx.Batch{}
	b.Queue(memory.BeginAdd)
	b.Queue(r.engine.LockOwnerQuery(), owner)
	b.Queue(r.engine.NearestQuery(len(vec)), owner, pgv.NewVector(vec), it.Content)
	br := conn.SendBatch(ctx, b)
	var (
		id, content, category, agent, session string
		active, exact                         bool
		updated                               time.Time
		sim                                   float64
	)
	_, err = br.Exec() // BEGIN
	if err == nil {
		_, err = br.Exec() // the owner's lock
	}
	if err == nil {
		err = br.QueryRow().Scan(&id, &content, &category, &agent, &session, &active, &updated, &sim, &exact)
	}
	found := !errors.Is(err, pgx.ErrNoRows)
	if !found {
		err = nil
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return err
	}
	if found && (exact || sim >= r.policy.Dedup.AutoMergeThreshold) {
		return errUnexpectedDuplicate
	}
	cat, _ := r.policy.Category(it.Category)
	b = &pgx.Batch{}
	b.Queue(r.engine.InsertQuery(), uuidV7(), owner, "", "", "agent", it.Category, it.Content,
		it.Importance, pgv.NewVector(vec), []string{}, time.Duration(cat.TTL).Seconds(), map[string]any{"similarity": sim}, "bench", "", nil, nil, "")
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	rows, err := br.Query()
	if err == nil {
		_, err = drain(rows)
	}
	if err != nil {
		_ = br.Close()
		return fmt.Errorf("inserting: %w", err)
	}
	tag, err := br.Exec()
	if err = errors.Join(err, br.Close()); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	if tag.String() != "COMMIT" {
		return fmt.Errorf("committing: the transaction was rolled back (%s)", tag)
	}
	committed = true
	return nil
}

// uuidV7 is a time-ordered id like the engine's (RFC 9562 version 7), so
// raw inserts land at the right edge of the primary key index as the
// engine's do.
func uuidV7() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	b[6] = 0x70 | (b[6] & 0x0f)
	b[8] = 0x80 | (b[8] & 0x3f)
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
