package write

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// EvictAfter enforces the per-owner cap after a commit that inserted rows:
// the owner's inactive memories go first, then active ones of lowest value
// (importance x decay, oldest first), pinned categories last. Evicted rows
// are hard-deleted with their history, like an early purge, and leave one
// history row of their own (action HistoryEvict, no content), so a client
// that held the id learns the memory was evicted, not lost; the purge job
// removes those rows after the retention. Best effort: a failure is
// logged, the write it follows has succeeded.
//
// Only a write by the user may evict memories of protected categories (or
// of categories the policy no longer has): otherwise an agent could delete
// a user's hard constraints by writing until they fall over the cap. An
// owner whose remaining memories are all protected then stays over the cap
// until the user or a job removes some.
func (s *Store) EvictAfter(ctx context.Context, owner string, results []AddResult, byUser bool) {
	var keep []string
	rows := 0
	for _, r := range results {
		if r.Action == ActionAdded || r.Action == ActionReplaced {
			keep = append(keep, r.Memory.ID)
			rows = max(rows, r.ownerRows)
		}
	}
	if len(keep) == 0 || rows <= s.core.Policy.Limits.MaxMemoriesPerOwner {
		return
	}
	n, err := s.evict(ctx, owner, keep, byUser)
	if err != nil {
		s.core.Log.Warn("evicting over the per-owner cap failed", "error", err)
		return
	}
	if n > 0 {
		results[len(results)-1].Evicted = n
	}
}

// HistoryEvict is the history action of a memory evicted over the
// per-owner cap: the only history row the memory keeps.
const HistoryEvict = "evict"

func (s *Store) evict(ctx context.Context, owner string, keep []string, byUser bool) (int, error) {
	var count int
	if err := s.core.Pool.QueryRow(ctx, `SELECT count(*) FROM `+s.sql.memories+` WHERE owner_id = $1`, owner).Scan(&count); err != nil {
		return 0, core.DBErr("counting memories", err)
	}
	over := count - s.core.Policy.Limits.MaxMemoriesPerOwner
	if over <= 0 {
		return 0, nil
	}
	var pinned, unprotected []string
	for _, c := range s.core.Policy.Categories {
		if c.Pinned {
			pinned = append(pinned, c.Name)
		}
		if !c.Protected {
			unprotected = append(unprotected, c.Name)
		}
	}
	var deleted int
	err := s.core.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.core.LockOwner(ctx, tx, owner); err != nil {
			return err
		}
		victims, err := s.evictionVictims(ctx, tx, owner, keep, over, pinned, unprotected, byUser)
		if err != nil {
			return err
		}
		deleted, err = s.deleteVictims(ctx, tx, owner, victims)
		return err
	})
	if err != nil {
		return 0, core.DBErr("evicting memories", err)
	}
	return deleted, nil
}
