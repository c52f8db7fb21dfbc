package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// rawConversation is the ceiling of conversation memory: the statements of
// internal/memory/conversation (append.go, windowstore.go)
// through pgx with nothing around them (no HTTP, JSON, validation,
// redaction, guard, window assembly). When those change, change these too.
type rawConversation struct {
	pool      *pgxpool.Pool
	sessions  string
	messages  string
	summaries string
	embedder  memory.Embedder
}

func newRawConversation(pool *pgxpool.Pool, schema string, emb memory.Embedder) *rawConversation {
	return &rawConversation{pool: pool, embedder: emb,
		sessions:  pgx.Identifier{schema, "sessions"}.Sanitize(),
		messages:  pgx.Identifier{schema, "messages"}.Sanitize(),
		summaries: pgx.Identifier{schema, "summaries"}.Sanitize(),
	}
}

// appendTurn is the engine's append: embed the turn's texts in one call
// (outside the transaction), then lock the session row, insert the
// messages in one batch and bump the session's counters.
func (r *rawConversation) appendTurn(ctx context.Context, owner, session string, msgs []map[string]any) error {
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		texts[i] = m["content"].(string)
	}
	vecs, err := r.embedder.Embed(ctx, texts)
	if err != nil {
		return err
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var count int64
	var archived bool
	if err := tx.QueryRow(ctx, `SELECT message_count, archived FROM `+r.sessions+` WHERE owner_id = $1 AND id = $2 FOR UPDATE`,
		owner, session).Scan(&count, &archived); err != nil {
		return fmt.Errorf("locking session %s: %w", session, err)
	}
	b := &pgx.Batch{}
	tokens := 0
	for i, m := range msgs {
		n := memory.CountTokens(texts[i])
		tokens += n
		b.Queue(`INSERT INTO `+r.messages+` (owner_id, session_id, seq, role, content, tool_name, tool_call_id, tokens, flags, embedding)
			VALUES ($1, $2, $3, $4, $5, '', '', $6, '{}', $7) RETURNING created_at`,
			owner, session, count+1+int64(i), m["role"], texts[i], n, pgv.NewVector(vecs[i]))
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("inserting messages: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+r.sessions+` SET message_count = message_count + $3, next_seq = next_seq + $3,
			token_count = token_count + $4, last_active_at = now() WHERE owner_id = $1 AND id = $2`,
		owner, session, len(msgs), tokens); err != nil {
		return fmt.Errorf("updating session: %w", err)
	}
	return tx.Commit(ctx)
}

// window reads what the engine's Window reads, in one read-only repeatable
// read transaction: the session row, its root summaries (summary strategy),
// and its newest messages in backward pages of 64, doubling, until they
// hold the budget or reach the summarized part. It returns the items a
// window could hold (roots plus messages read); the assembly is Go work
// the ceiling skips.
func (r *rawConversation) window(ctx context.Context, owner, session string, summary bool, budget int) (int, error) {
	return r.windowRecorded(ctx, owner, session, summary, budget, nil)
}

// pgStmt is one statement a raw operation ran, with its arguments.
type pgStmt struct {
	sql  string
	args []any
}

// windowRecorded is window; rec, when not nil, gets every statement it ran
// (the pgbench cross-check replays them: conversation_pgbench.go).
func (r *rawConversation) windowRecorded(ctx context.Context, owner, session string, summary bool, budget int, rec *[]pgStmt) (int, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	query := func(sql string, args ...any) (pgx.Rows, error) {
		if rec != nil {
			*rec = append(*rec, pgStmt{sql: sql, args: args})
		}
		return tx.Query(ctx, sql, args...)
	}
	var count, through, summaries int64
	row, err := query(`SELECT message_count, summarized_through, summary_count FROM `+r.sessions+` WHERE owner_id = $1 AND id = $2`, owner, session)
	if err != nil {
		return 0, err
	}
	tag, err := pgx.ForEachRow(row, []any{&count, &through, &summaries}, func() error { return nil })
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() != 1 {
		return 0, fmt.Errorf("session %s: %w", session, pgx.ErrNoRows)
	}
	items := 0
	if summary && summaries > 0 {
		rows, err := query(`SELECT id, owner_id, session_id, depth, content, expand_hint, earliest_seq, latest_seq,
				earliest_at, latest_at, tokens, descendant_count, method, created_at
			FROM `+r.summaries+` WHERE owner_id = $1 AND session_id = $2 AND parent_id IS NULL ORDER BY earliest_seq`, owner, session)
		if err != nil {
			return 0, err
		}
		n, err := drain(rows)
		if err != nil {
			return 0, err
		}
		items += n
	}
	before, page, tokens := count+1, 64, 0
	for before > 1 {
		rows, err := query(`SELECT seq, role, content, tool_name, tool_call_id, tokens, created_at, flags FROM `+r.messages+`
			WHERE owner_id = $1 AND session_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4`, owner, session, before, page)
		if err != nil {
			return 0, err
		}
		n := 0
		for rows.Next() {
			var seq int64
			var t int
			var role, content, tn, tc string
			var flags []string
			var at time.Time
			if err := rows.Scan(&seq, &role, &content, &tn, &tc, &t, &at, &flags); err != nil {
				rows.Close()
				return 0, err
			}
			before, tokens, n = seq, tokens+t, n+1
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
		items += n
		if n == 0 || tokens > budget || (summary && before <= through+1) {
			break
		}
		page = min(page*2, 4096)
	}
	return items, nil
}
