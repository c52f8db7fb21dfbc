package memory

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ownerLockAttempts bounds lockOwner's loop; each retry means the owner's
// row was erased or created by another transaction in between, which a
// third attempt never needs in practice.
const ownerLockAttempts = 5

// lockOwner serializes the writes of one owner: it locks the owner's row of
// owner_locks (a table of this tenant's schema) until tx ends, creating the
// row on the owner's first write. Only roles with UPDATE on the table can
// lock its rows, so no other tenant can hold the lock this tenant's writers
// wait on (an advisory lock could: their keyspace is shared by every role of
// the database). Waits are bounded by the session's lock_timeout.
//
// The common case is one statement. For a new owner: the row is inserted,
// and an inserted, uncommitted row locks as well as FOR UPDATE does (a
// concurrent insert of the same owner waits for this transaction, then
// finds the row and locks it).
func (s *Store) lockOwner(ctx context.Context, tx pgx.Tx, owner string) error {
	for range ownerLockAttempts {
		tag, err := tx.Exec(ctx, `SELECT FROM `+s.sql.ownerLocks+` WHERE owner_id = $1 FOR UPDATE`, owner)
		if err != nil {
			return s.dbErr("locking owner", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		tag, err = tx.Exec(ctx, `INSERT INTO `+s.sql.ownerLocks+` (owner_id) VALUES ($1) ON CONFLICT (owner_id) DO NOTHING`, owner)
		if err != nil {
			return s.dbErr("locking owner", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		// Another transaction created the row and committed while this one
		// waited: lock it on the next round.
	}
	return fmt.Errorf("locking owner: %w: the owner's lock row kept changing", ErrBusy)
}
