package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Stats are the tenant-wide counts of the admin stats route (GET /v1/stats),
// read by `kubectl engram status` so platform teams see a tenant's size
// without logging into PostgreSQL.
type Stats struct {
	// Active memories: what search and context may return (expired ones
	// included until the expire job deactivates them).
	Active int64 `json:"active"`
	// Inactive memories: forgotten, expired, deleted or superseded, kept
	// until the purge job removes them.
	Inactive int64 `json:"inactive"`
	// Owners with at least one memory, active or not.
	Owners int64 `json:"owners"`
}

// Stats counts the tenant's memories and owners in one scan of the
// memories table (the session's statement_timeout bounds it on a huge tenant).
func (s *Store) Stats(ctx context.Context) (*Stats, error) {
	var st Stats
	err := s.core.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE active), count(*) FILTER (WHERE NOT active),
		count(DISTINCT owner_id) FROM `+s.sql.memories).Scan(&st.Active, &st.Inactive, &st.Owners)
	if err != nil {
		return nil, core.DBErr("counting memories", err)
	}
	return &st, nil
}
