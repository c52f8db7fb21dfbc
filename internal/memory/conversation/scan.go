package conversation

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// scanRows reads the rows of sql one at a time with scan, as visit decides
// (nil: every row); the rows after it stops are discarded unread. Errors
// are "reading "+what.
func scanRows[T any](ctx context.Context, q core.RowsQuerier, what string, scan func(pgx.Row) (T, error),
	visit func(T) (add, more bool), sql string, args ...any,
) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, core.DBErr("reading "+what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, core.DBErr("reading "+what, err)
		}
		add, more := true, true
		if visit != nil {
			add, more = visit(v)
		}
		if add {
			out = append(out, v)
		}
		if !more {
			rows.Close()
			break
		}
	}
	return out, core.DBErr("reading "+what, rows.Err())
}

// scanMessageMeta reads a message's seq, role and tokens (a query's
// columns in that order), for planning without the content.
func scanMessageMeta(r pgx.CollectableRow) (Message, error) {
	var m Message
	var role string
	err := r.Scan(&m.Seq, &role, &m.Tokens)
	m.Role = Role(role)
	return m, err
}
