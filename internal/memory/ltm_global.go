package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// ownerMatch is the owner condition of search and context for the owner
// bound to placeholder ph: the owner's rows and, when the policy has global
// categories, the tenant-wide ones.
func (s *longTerm) ownerMatch(ph string) string {
	if !s.core.Policy.HasGlobal() {
		return `m.owner_id = ` + ph
	}
	return `m.owner_id IN (` + ph + `, '` + GlobalOwner + `')`
}

// ListGlobal pages through the tenant-wide memories (categories with
// global: true), most recently written first: active ones that have not
// expired, at most req.Limit (0 = 50, at most 500) and the byte cap per
// page, of req.Category when set, from req.Cursor; req.Owner, Agent and
// Session are ignored. Errors: ValidationError.
func (s *Store) ListGlobal(ctx context.Context, req ListRequest) (*ListPage, error) {
	fe := &core.FieldErrors{}
	limit := fe.Limit(req.Limit, defaultListLimit, maxListLimit)
	if c, ok := s.core.Policy.Category(req.Category); req.Category != "" && (!ok || !c.Global) {
		fe.Add("category", "%q is not a global category of this runtime's policy", req.Category)
	}
	after, afterID, err := decodeCursor(req.Cursor)
	fe.Cursor(err)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	a := &core.Args{}
	sql := `SELECT ` + s.sql.columns + ` FROM ` + s.sql.memories + ` AS m
		WHERE m.owner_id = ` + a.Add(GlobalOwner) + ` AND m.active AND (m.expires_at IS NULL OR m.expires_at > now())`
	if req.Category != "" {
		sql += ` AND m.category = ` + a.Add(req.Category)
	}
	if !after.IsZero() {
		sql += ` AND (m.updated_at, m.id) < (` + a.Add(after) + `::timestamptz, ` + a.Add(afterID) + `::uuid)`
	}
	sql += ` ORDER BY m.updated_at DESC, m.id DESC LIMIT ` + a.Add(limit+1)
	return (*reader)(s).memoryPage(ctx, "listing global memories", req.MaxBytes, limit, updatedCursor, sql, a.List...)
}

// updatedCursor is the cursor after m in a list ordered by (updated_at, id).
func updatedCursor(m Memory) string { return core.EncodeCursor(m.UpdatedAt, m.ID) }

// DeleteGlobal soft-deletes one tenant-wide memory (with history). Errors:
// ValidationError; ErrNotFound; ErrProtected (source other than user or system).
func (s *Store) DeleteGlobal(ctx context.Context, id string, source Source) error {
	fe := &core.FieldErrors{}
	fe.ID("id", id)
	if err := fe.Err(); err != nil {
		return err
	}
	if source != SourceUser && source != SourceSystem {
		return &RuleError{Rule: "global memories: only source user or system may delete them"}
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockOwner(ctx, tx, GlobalOwner); err != nil {
			return err
		}
		// Lock and read the row first: its history row is written from
		// what was read (historyrow.go).
		var content string
		err := tx.QueryRow(ctx, `SELECT content FROM `+s.sql.memories+`
			WHERE id = $1 AND owner_id = $2 AND active FOR UPDATE`, id, GlobalOwner).Scan(&content)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("global memory %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return core.DBErr("deleting global memory "+id, err)
		}
		_, err = tx.Exec(ctx, `WITH upd AS (
				UPDATE `+s.sql.memories+` SET active = false, deactivated_at = now(), updated_at = now()
				WHERE id = $1 RETURNING id)
			INSERT INTO `+s.sql.history+` (memory_id, owner_id, action, actor, actor_id, old_content)
			VALUES ($1, $2, 'delete', $3, $4, $5)`, id, GlobalOwner, string(source), core.ActorID(ctx), content)
		return core.DBErr("deleting global memory "+id, err)
	})
}
