package memory

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engram-dev/engram/internal/memory/core"
)

// compactFreshMargin: a memory counts as compared by a complete pass only
// when it was written this long before the pass began. updated_at is the
// start of the writing transaction, which may commit after the pass took its
// snapshot; no write transaction of the engine lasts an hour.
const compactFreshMargin = time.Hour

// compactCursor is the last row a pass looked at, in compaction order.
type compactCursor struct {
	importance int
	updatedAt  time.Time
	id         string
}

// compactState is one owner's row of compaction_state.
type compactState struct {
	passStartedAt   *time.Time // a pass is in progress
	cursor          *compactCursor
	comparedThrough *time.Time // nil: never completed a pass
	// threshold is the similarity threshold of the pass in progress or of
	// the last complete one; for another, the state is void.
	threshold *float64
}

func (s *maintenance) loadCompactState(ctx context.Context, owner string) (compactState, error) {
	var st compactState
	var imp *int
	var at *time.Time
	var id *string
	err := s.core.Pool.QueryRow(ctx, `SELECT pass_started_at, cursor_importance, cursor_updated_at, cursor_id::text, compared_through, threshold
		FROM `+s.sql.compactState+` WHERE owner_id = $1`, owner).Scan(&st.passStartedAt, &imp, &at, &id, &st.comparedThrough, &st.threshold)
	if errors.Is(err, pgx.ErrNoRows) {
		return compactState{}, nil
	}
	if err != nil {
		return compactState{}, core.DBErr("reading the compaction state", err)
	}
	if imp != nil && at != nil && id != nil {
		st.cursor = &compactCursor{importance: *imp, updatedAt: *at, id: *id}
	}
	return st, nil
}

type execer interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

func (s *maintenance) saveCompactState(ctx context.Context, q execer, owner string, st compactState) error {
	var imp *int
	var at *time.Time
	var id *string
	if c := st.cursor; c != nil {
		imp, at, id = &c.importance, &c.updatedAt, &c.id
	}
	_, err := q.Exec(ctx, `INSERT INTO `+s.sql.compactState+` AS c
			(owner_id, pass_started_at, cursor_importance, cursor_updated_at, cursor_id, compared_through, threshold)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (owner_id) DO UPDATE SET pass_started_at = $2, cursor_importance = $3, cursor_updated_at = $4,
			cursor_id = $5, compared_through = $6, threshold = $7`,
		owner, st.passStartedAt, imp, at, id, st.comparedThrough, st.threshold)
	return core.DBErr("saving the compaction state", err)
}
