package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/core"
)

// lockOwner serializes the writes of one owner until tx ends
// (core.State.LockOwner).
func (s *Store) lockOwner(ctx context.Context, tx core.DBTX, owner string) error {
	return s.core.LockOwner(ctx, tx, owner)
}

// LockOwnerQuery is lockOwner's statement, $1 the owner (the benchmark's
// raw side runs exactly this; core.State.LockOwnerQuery).
func (s *Store) LockOwnerQuery() string { return s.core.LockOwnerQuery() }
