package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
)

// The vector and the statement of an update (Store.Update, crud.go).

// updateVector is the vector of an update's new content: the client's
// own (UpdateRequest.Embedding), else the embedder's; and during a
// re-embed the next embedder's, computed alongside (nil: none; a dual
// write, core.State.NextVectors).
func (s *Store) updateVector(ctx context.Context, req UpdateRequest, content string) (vec, next []float32, err error) {
	wait := s.core.NextVectors(ctx, []string{content})
	if req.Embedding != nil {
		vec = slices.Clone(req.Embedding)
	} else {
		vecs, err := s.core.Embedder.Embed(ctx, []string{content})
		if err != nil {
			return nil, nil, fmt.Errorf("embedding: %w", err)
		}
		vec = vecs[0]
	}
	if nexts := wait(); nexts != nil {
		next = nexts[0]
	}
	return vec, next, nil
}

// holdNext checks, in the update's transaction before it reads the
// memory, that the tenant still re-embeds toward next's embedder, and
// holds it until the commit (core.State.NextHeld): next, or nil when the
// re-embed ended.
func (s *Store) holdNext(ctx context.Context, tx pgx.Tx, next []float32) ([]float32, error) {
	if next == nil {
		return nil, nil
	}
	held, err := s.core.NextHeld(ctx, tx)
	if err != nil || !held {
		return nil, err
	}
	return next, nil
}

// applyUpdate updates cur, which the caller has locked, and writes its
// history row from cur and the request (historyrow.go).
func (s *reader) applyUpdate(ctx context.Context, tx pgx.Tx, cur Memory, req UpdateRequest, src Source,
	category, content string, flags []string, vec, next []float32, ttl *time.Duration) (Memory, error) {
	importance := cur.Importance
	if req.Importance != nil {
		importance = *req.Importance
	}
	var newContent *string
	var embedding any
	if req.Content != nil {
		newContent, embedding = &content, pgv.NewVector(vec)
	}
	// The stored vector (migration 19) is written anew under the
	// configuration writes use, even when the content stays.
	textConfig, err := s.core.WriteTextConfig(ctx, tx)
	if err != nil {
		return Memory{}, err
	}
	args := []any{cur.ID, newContent, embedding, write.FlagsOrEmpty(flags), category,
		importance, string(src), s.w.ExpirySeconds(category, ttl), cur.Content, cur.Category, core.ActorID(ctx), cur.Owner,
		write.MetadataParam(req.Metadata), write.TagsParam(req.Tags), updateLabelDetails(cur, req), textConfig}
	dual := ""
	if req.Content != nil && next != nil {
		dual, args = "embedding_next = $17, ", append(args, pgv.NewVector(next))
	}
	sql := `WITH upd AS (
			UPDATE ` + s.sql.memories + ` AS m SET
				content = coalesce($2, m.content), embedding = coalesce($3, m.embedding), ` + dual + `
				flags = CASE WHEN $2::text IS NULL THEN m.flags ELSE $4 END,
				category = $5, importance = $6, source = $7,
				metadata = coalesce($13::jsonb, m.metadata), tags = coalesce($14::text[], m.tags),
				tsv_config = NULLIF($16::text, ''), tsv_local = to_tsvector(NULLIF($16::text, '')::regconfig, coalesce($2, m.content)),
				expires_at = ` + write.Expiry("$8") + `, updated_at = now()
			WHERE m.id = $1 RETURNING ` + s.sql.columns + `),
		h AS (
			INSERT INTO ` + s.sql.history + ` (memory_id, owner_id, action, actor, actor_id, old_content, new_content, details)
			VALUES ($1::uuid, $12, 'update', $7, $11, $9, coalesce($2, $9),
				jsonb_build_object('category', $5::text, 'importance', $6::int, 'previousCategory', $10::text) || $15::jsonb))
		SELECT * FROM upd`
	m, err := s.w.UpdateAndPrune(ctx, tx, cur.ID, sql, args...)
	if err != nil {
		return Memory{}, core.DBErr("updating memory "+cur.ID, err)
	}
	return m, nil
}
