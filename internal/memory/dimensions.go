package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/pg"
)

// IsDataException reports a PostgreSQL data exception (SQLSTATE 22000),
// after which the service asks StaleDimensions.
func IsDataException(err error) bool { return pg.IsDataException(err) }

// StaleDimensions reports whether the tenant's memory vectors no longer
// have this store's embedder's dimensions, and how many they have: a
// re-embed switched the tenant to another size while this process still
// runs the old embedder, until the rollout replaces it (its searches and
// adds then fail with a data exception, pgvector's "different vector
// dimensions"). Asked only after such an error; false when it cannot tell.
// It returns the tenant's size and this store's.
func (s *Store) StaleDimensions(ctx context.Context) (tenant, own int, stale bool) {
	var dims int
	err := s.core.Pool.QueryRow(ctx, `SELECT a.atttypmod FROM pg_attribute AS a
		WHERE a.attrelid = to_regclass($1) AND a.attname = 'embedding' AND NOT a.attisdropped`, s.sql.memories).Scan(&dims)
	own = s.core.Embedder.Dimensions()
	if err != nil || dims <= 0 {
		return 0, own, false
	}
	return dims, own, dims != own
}
