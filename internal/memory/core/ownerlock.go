package core

import "context"

// LockOwner serializes the writes of one owner: it locks the owner's row of
// owner_locks (a table of this tenant's schema) until tx ends, creating the
// row on the owner's first write. Only roles with UPDATE on the table can
// lock its rows, so no other tenant can hold the lock this tenant's writers
// wait on (an advisory lock could: their keyspace is shared by every role of
// the database). Waits are bounded by the session's lock_timeout.
func (s *State) LockOwner(ctx context.Context, tx DBTX, owner string) error {
	if _, err := tx.Exec(ctx, s.LockOwnerQuery(), owner); err != nil {
		return DBErr("locking owner", err)
	}
	return nil
}

// LockOwnerQuery is LockOwner's statement, $1 the owner (the benchmark's
// raw side runs exactly this). One statement in every case, so it can be
// pipelined with what follows it: an existing row is locked by ON CONFLICT
// DO UPDATE, which locks the conflicting row (FOR UPDATE strength) even
// when its WHERE is false, so no new row version is written; a missing row
// is inserted, and an inserted, uncommitted row locks as well (a concurrent
// first write of the same owner waits for this transaction, then finds the
// row and locks it; a row an erase deleted meanwhile is inserted again).
func (s *State) LockOwnerQuery() string {
	return `INSERT INTO ` + s.Table("owner_locks") + ` AS l (owner_id) VALUES ($1)
		ON CONFLICT (owner_id) DO UPDATE SET owner_id = excluded.owner_id WHERE false`
}

// CountOwnerRows counts the owner's rows of table (sessions or episodes)
// with q; the callers hold the owner's lock, so no concurrent write of the
// owner can add a row between the count and their insert.
func CountOwnerRows(ctx context.Context, q Querier, table, what, owner string) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE owner_id = $1`, owner).Scan(&n); err != nil {
		return 0, DBErr("counting the owner's "+what, err)
	}
	return n, nil
}
