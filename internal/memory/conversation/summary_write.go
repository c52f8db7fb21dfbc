package conversation

import (
	"context"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Embedding and storing a summary (compaction's leaves and condensations;
// an episode's summary is embedded here too).

// Embedded is a summary's vector (nil: the embedder failed) and, during a
// re-embed, the next embedder's (nil: none; core.Next).
type Embedded struct {
	Vec, Next *pgv.Vector
}

// EmbedSummary embeds a summary for history search; best effort like
// messages. During a re-embed the next embedder embeds it alongside.
func (s *Store) EmbedSummary(ctx context.Context, content string) Embedded {
	next := s.core.NextVectors(ctx, []string{content})
	vecs, err := s.core.Embedder.Embed(ctx, []string{content})
	nexts := next()
	if err != nil || len(vecs) != 1 {
		s.core.Log.Warn("storing a summary without an embedding", "error", err)
		return Embedded{}
	}
	v := pgv.NewVector(vecs[0])
	e := Embedded{Vec: &v}
	if nexts != nil {
		n := pgv.NewVector(nexts[0])
		e.Next = &n
	}
	return e
}

// HoldNext checks, in tx before any table with a vector, that the tenant
// still re-embeds toward e.Next's embedder and holds it until the commit
// (core.State.NextHeld); when it no longer does, e.Next is dropped.
func (s *Store) HoldNext(ctx context.Context, tx pgx.Tx, e *Embedded) error {
	if e.Next == nil {
		return nil
	}
	held, err := s.core.NextHeld(ctx, tx)
	if err != nil {
		return err
	}
	if !held {
		e.Next = nil
	}
	return nil
}

// NextDone counts e's dual write once committed.
func (s *Store) NextDone(e Embedded) {
	if e.Next != nil {
		s.core.NextDone(1)
	}
}

// insertSummary writes y (with its embeddings) in tx.
func (s *Store) insertSummary(ctx context.Context, tx pgx.Tx, y Summary, e Embedded) error {
	textConfig, err := s.core.WriteTextConfig(ctx, tx) // the stored vector's (migration 19)
	if err != nil {
		return err
	}
	args := []any{y.ID, y.Owner, y.SessionID, y.Depth, y.Content, y.ExpandHint, y.EarliestSeq, y.LatestSeq, y.EarliestAt, y.LatestAt,
		y.Tokens, y.DescendantCount, y.Method, e.Vec, textConfig}
	col, val := "", ""
	if e.Next != nil {
		col, val, args = ", embedding_next", ", $16", append(args, e.Next)
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+s.sql.summaries+` (id, owner_id, session_id, depth, content, expand_hint,
			earliest_seq, latest_seq, earliest_at, latest_at, tokens, descendant_count, method, embedding, tsv_config, tsv_local`+col+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, `+core.TextLocal("$15", "$5")+val+`)`, args...)
	return core.DBErr("storing summary", err)
}
