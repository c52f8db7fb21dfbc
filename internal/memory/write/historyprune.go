package write

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// A memory's history grows by a row with every update and merge, and an
// agent may update its own memory as often as the rate limit lets it
// (issue 26's review: 1,000 PATCHes, 3.3 MB of history, never pruned). The
// writes that can repeat on one memory — an update, a merge or a
// reactivation by add, an arbiter's update — prune its history right after
// adding their row, in the same transaction and round trip: it keeps the
// row that created the memory (who wrote it first) and the newest
// limits.maxHistoryPerMemory rows. The other rows a memory gets (delete,
// supersede, expire, forget, compaction) come at most once between two
// such writes, since each ends the memory's active life.

// updateAndPrune runs sql, a statement that updates memory id, adds its
// history row and returns the memory's columns, then prunes that memory's
// history, both in one batch. The prune is a statement of its own, so it
// sees the new row whatever the engine: PostgreSQL runs the data-modifying
// CTEs of one statement on one snapshot, but Citus may run them one after
// another, and a prune inside the update's statement would count the new
// row on one and not on the other.
func (s *Store) UpdateAndPrune(ctx context.Context, tx core.DBTX, id, sql string, args ...any) (Memory, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(s.pruneHistoryQuery(), id, s.core.Policy.Limits.MaxHistoryPerMemory)
	br := tx.SendBatch(ctx, b)
	m, err := ScanMemory(br.QueryRow())
	if err != nil {
		_ = br.Close()
		return Memory{}, err
	}
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return Memory{}, fmt.Errorf("pruning its history: %w", err) // the caller's dbErr classifies it
	}
	return m, br.Close()
}

// pruneHistoryQuery deletes the history rows of memory $1 but its first
// and its newest $2, through the (memory_id, id) index.
func (s *Store) pruneHistoryQuery() string {
	h := s.sql.history
	return `DELETE FROM ` + h + ` AS ph
		WHERE ph.memory_id = $1
			AND ph.id > (SELECT min(f.id) FROM ` + h + ` AS f WHERE f.memory_id = $1)
			AND ph.id <= (SELECT k.id FROM ` + h + ` AS k WHERE k.memory_id = $1 ORDER BY k.id DESC OFFSET $2 LIMIT 1)`
}
