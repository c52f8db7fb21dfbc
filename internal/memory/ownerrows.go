package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/core"
)

// countOwnerRows counts the owner's rows of table (sessions or episodes)
// with q; the callers hold the owner's lock, so no concurrent write of the
// owner can add a row between the count and their insert.
func (s *reader) countOwnerRows(ctx context.Context, q core.Querier, table, what, owner string) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE owner_id = $1`, owner).Scan(&n); err != nil {
		return 0, core.DBErr("counting the owner's "+what, err)
	}
	return n, nil
}
