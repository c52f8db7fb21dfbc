package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// rawSQL is the ceiling: the same database work as the memory service,
// issued directly through pgx with nothing around it (no HTTP, JSON,
// validation, redaction, access statistics). The statements mirror
// internal/memory (add.go, search.go, contextrender.go, sql.go); when those
// change, change these too, or the ratio compares different work.
type rawSQL struct {
	pool      *pgxpool.Pool
	schema    string
	memories  string
	history   string
	locks     string // owner_locks
	embedder  memory.Embedder
	policy    memory.Policy
	decayName []string
	decaySec  []float64
}

func newRawSQL(pool *pgxpool.Pool, schema string, policy memory.Policy, emb memory.Embedder) *rawSQL {
	r := &rawSQL{
		pool: pool, schema: schema, embedder: emb, policy: policy,
		memories: pgx.Identifier{schema, "memories"}.Sanitize(),
		history:  pgx.Identifier{schema, "memory_history"}.Sanitize(),
		locks:    pgx.Identifier{schema, "owner_locks"}.Sanitize(),
	}
	for _, c := range policy.Categories {
		r.decayName = append(r.decayName, c.Name)
		r.decaySec = append(r.decaySec, time.Duration(c.HalfLife).Seconds())
	}
	return r
}

// The memory columns the engine returns (internal/memory/sql.go).
const rawMemoryColumns = `m.id::text, m.owner_id, m.agent_id, m.session_id, m.source, m.category, m.content,
	m.importance, m.flags, m.active, m.superseded_by::text, m.expires_at, m.created_at, m.updated_at,
	m.last_accessed_at, m.access_count`

// rawDecay is the engine's decay expression (internal/memory/sql.go) with
// the category names in $N and half-lives in $S.
func rawDecay(names, seconds string) string {
	return strings.NewReplacer("$N", names, "$S", seconds).Replace(`coalesce((SELECT CASE WHEN h.s > 0 THEN exp(-0.6931471805599453 / h.s *
		greatest(extract(epoch FROM now() - greatest(m.updated_at, coalesce(m.last_accessed_at, m.updated_at))), 0)) END
		FROM unnest($N::text[], $S::float8[]) AS h(c, s) WHERE h.c = m.category), 1)`)
}

func (r *rawSQL) embed(ctx context.Context, text string) (pgv.Vector, error) {
	v, err := r.embedder.Embed(ctx, []string{text})
	if err != nil {
		return pgv.Vector{}, err
	}
	return pgv.NewVector(v[0]), nil
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

// vectorSearch is the exact per-owner KNN query (top k by cosine distance).
func (r *rawSQL) vectorSearch(ctx context.Context, owner, query string, k int) (int, error) {
	vec, err := r.embed(ctx, query)
	if err != nil {
		return 0, err
	}
	rows, err := r.pool.Query(ctx, `SELECT `+rawMemoryColumns+`, 1 - (m.embedding <=> $2)
		FROM `+r.memories+` AS m
		WHERE m.owner_id = $1 AND m.active AND (m.expires_at IS NULL OR m.expires_at > now())
		ORDER BY m.embedding <=> $2 LIMIT $3`, owner, vec, k)
	if err != nil {
		return 0, err
	}
	return drain(rows)
}

// hybridSearch is the engine's hybrid SQL (internal/memory/search.go, mode
// hybrid, no agent/session/category filter).
func (r *rawSQL) hybridSearch(ctx context.Context, owner, query string, k int) (int, error) {
	vec, err := r.embed(ctx, query)
	if err != nil {
		return 0, err
	}
	w := r.policy.Search
	rows, err := r.pool.Query(ctx, `SELECT * FROM (SELECT `+rawMemoryColumns+`, 1 - (m.embedding <=> $4) AS vs,
			CASE WHEN m.tsv @@ q.q THEN ts_rank_cd(m.tsv, q.q, 32) ELSE 0 END AS ts, `+rawDecay("$2", "$3")+` AS ds
		FROM `+r.memories+` AS m, (SELECT replace(plainto_tsquery('english', $5)::text, ' & ', ' | ')::tsquery) AS q(q)
		WHERE m.owner_id = $1 AND m.active AND (m.expires_at IS NULL OR m.expires_at > now())) AS r
		ORDER BY $6::float8 * r.vs + $7::float8 * r.ts + $8::float8 * r.ds DESC, r.id LIMIT $9`,
		owner, r.decayName, r.decaySec, vec, query, w.VectorWeight, w.TextWeight, w.DecayWeight, k)
	if err != nil {
		return 0, err
	}
	return drain(rows)
}

// contextCandidates is the engine's context query with a query text and
// the default budget of 1,000 tokens (internal/memory/contextrender.go): the
// best memories of each category for the budget (125; every pinned one up to
// 1,000, ordered by value), best first. Rendering the text from it is cheap
// Go work the ceiling skips.
func (r *rawSQL) contextCandidates(ctx context.Context, owner, query string) (int, error) {
	vec, err := r.embed(ctx, query)
	if err != nil {
		return 0, err
	}
	pinned := []string{}
	for _, c := range r.policy.Categories {
		if c.Pinned {
			pinned = append(pinned, c.Name)
		}
	}
	value := `m.importance / 10.0 * ` + rawDecay("$2", "$3")
	rows, err := r.pool.Query(ctx, `SELECT id, category, content, v, total FROM (
			SELECT m.id::text AS id, m.category, m.content, v.v, m.updated_at,
				row_number() OVER (PARTITION BY m.category ORDER BY v.v DESC, m.updated_at DESC, m.id) AS rank,
				count(*) OVER () AS total
			FROM `+r.memories+` AS m, LATERAL (SELECT CASE WHEN m.category = ANY($5::text[]) THEN `+value+`
				ELSE (1 - (m.embedding <=> $4)) + 0.25 * `+value+` END AS v) AS v
			WHERE m.owner_id = $1 AND m.active AND (m.expires_at IS NULL OR m.expires_at > now())
				AND NOT ('injection' = ANY(m.flags))) AS c
		WHERE rank <= CASE WHEN category = ANY($5::text[]) THEN 1000 ELSE 125 END
		ORDER BY v DESC, updated_at DESC, id`, owner, r.decayName, r.decaySec, vec, pinned)
	if err != nil {
		return 0, err
	}
	return drain(rows)
}

// errUnexpectedDuplicate: the add workload writes fresh texts; a neighbour
// above the merge threshold means the generator is broken, not the engine.
var errUnexpectedDuplicate = errors.New("the nearest neighbour is a near-duplicate; the add workload expects fresh texts")

// add is the engine's add path for a fresh text: one transaction that takes
// the owner's row lock, finds the owner's nearest neighbour among all
// non-superseded rows (locking it), and inserts the memory with its history
// row (internal/memory/add.go: lockOwner, nearest, insert).
func (r *rawSQL) add(ctx context.Context, owner string, it item) error {
	vec, err := r.embed(ctx, it.Content)
	if err != nil {
		return err
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := r.lockOwner(ctx, tx, owner); err != nil {
		return err
	}
	var id string
	var sim float64
	var exact bool
	err = tx.QueryRow(ctx, `SELECT m.id::text, 1 - (m.embedding <=> $2), m.content = $3
		FROM `+r.memories+` AS m
		WHERE m.owner_id = $1 AND m.superseded_by IS NULL
		ORDER BY m.content = $3 DESC, m.embedding <=> $2
		LIMIT 1 FOR UPDATE OF m`, owner, vec, it.Content).Scan(&id, &sim, &exact)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return err
	case exact || sim >= r.policy.Dedup.AutoMergeThreshold:
		return errUnexpectedDuplicate
	}
	cat, _ := r.policy.Category(it.Category)
	var newID string
	err = tx.QueryRow(ctx, `WITH ins AS (
			INSERT INTO `+r.memories+` AS m (id, owner_id, agent_id, session_id, source, category, content, importance, embedding, flags, expires_at)
			VALUES ($8, $1, '', '', 'agent', $2, $3, $4, $5, '{}',
				CASE WHEN $6::float8 > 0 THEN now() + make_interval(secs => $6::float8) END)
			RETURNING `+rawMemoryColumns+`),
		h AS (
			INSERT INTO `+r.history+` (memory_id, owner_id, action, actor, new_content, details)
			SELECT id::uuid, owner_id, 'add', 'agent', content, jsonb_build_object('similarity', $7::float8) FROM ins)
		SELECT id FROM ins`, owner, it.Category, it.Content, it.Importance, vec,
		time.Duration(cat.TTL).Seconds(), sim, uuidV7()).Scan(&newID)
	if err != nil {
		return fmt.Errorf("inserting: %w", err)
	}
	return tx.Commit(ctx)
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

// lockOwner is the engine's owner lock (internal/memory/ownerlock.go): lock
// the owner's row of owner_locks, or create it on the owner's first write.
func (r *rawSQL) lockOwner(ctx context.Context, tx pgx.Tx, owner string) error {
	for range 5 {
		tag, err := tx.Exec(ctx, `SELECT FROM `+r.locks+` WHERE owner_id = $1 FOR UPDATE`, owner)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		tag, err = tx.Exec(ctx, `INSERT INTO `+r.locks+` (owner_id) VALUES ($1) ON CONFLICT (owner_id) DO NOTHING`, owner)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
	}
	return errors.New("the owner's lock row kept changing")
}
