package write

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// victim is a memory chosen for eviction, with what its history row keeps.
type victim struct {
	id, category string
	active       bool
}

// evictVictimChunk bounds the victims one statement deletes: three
// parameters each for the history rows' VALUES, under PostgreSQL's 65,535.
const evictVictimChunk = 1000

// evictionVictims locks and returns the over memories of owner of least
// value (inactive first, then not pinned, then by decayed importance and
// age), none of keep, only of unprotected categories unless byUser.
func (s *Store) evictionVictims(ctx context.Context, tx pgx.Tx, owner string, keep []string, over int,
	pinned, unprotected []string, byUser bool) ([]victim, error) {
	rows, err := tx.Query(ctx, `SELECT m.id::text, m.category, m.active FROM `+s.sql.memories+` AS m
		WHERE m.owner_id = $1 AND m.id <> ALL($2::uuid[]) AND ($7 OR m.category = ANY($8))
		ORDER BY m.active, m.category = ANY($4), m.importance * `+DecayExpr(s.sql.access, "$5", "$6")+`, m.updated_at
		LIMIT $3 FOR UPDATE SKIP LOCKED`, owner, keep, over, pinned, s.decayNames, s.decaySeconds, byUser, unprotected)
	if err != nil {
		return nil, core.DBErr("choosing memories to evict", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (victim, error) {
		var v victim
		err := r.Scan(&v.id, &v.category, &v.active)
		return v, err
	})
	if err != nil {
		return nil, core.DBErr("choosing memories to evict", err)
	}
	return out, nil
}

// deleteVictims deletes the victims (locked by evictionVictims in tx) with
// their history and access statistics, and leaves each one history row,
// action HistoryEvict. The history rows are VALUES from what
// evictionVictims read, not an INSERT ... SELECT of the deleted rows,
// which Citus would run through the coordinator with a two-phase commit
// (historyrow.go); on plain PostgreSQL the rows are the same.
func (s *Store) deleteVictims(ctx context.Context, tx pgx.Tx, owner string, victims []victim) (int, error) {
	deleted := 0
	for start := 0; start < len(victims); start += evictVictimChunk {
		chunk := victims[start:min(start+evictVictimChunk, len(victims))]
		ids := make([]string, len(chunk))
		args := []any{nil, owner, s.core.Policy.Limits.MaxMemoriesPerOwner}
		values := make([]string, len(chunk))
		for i, v := range chunk {
			ids[i] = v.id
			n := len(args)
			values[i] = "($" + strconv.Itoa(n+1) + "::uuid, $2, '" + HistoryEvict + "', 'system', jsonb_build_object('maxMemoriesPerOwner', $3::int, 'category', $" +
				strconv.Itoa(n+2) + "::text, 'wasActive', $" + strconv.Itoa(n+3) + "::boolean))"
			args = append(args, v.id, v.category, v.active)
		}
		args[0] = ids
		var n int
		err := tx.QueryRow(ctx, `WITH dh AS (DELETE FROM `+s.sql.history+` AS h WHERE h.memory_id = ANY($1::uuid[])),
			da AS (DELETE FROM `+s.sql.access+` AS a WHERE a.memory_id = ANY($1::uuid[])),
			dm AS (DELETE FROM `+s.sql.memories+` AS m WHERE m.id = ANY($1::uuid[]) RETURNING 1),
			eh AS (INSERT INTO `+s.sql.history+` (memory_id, owner_id, action, actor, details) VALUES `+strings.Join(values, ", ")+`)
			SELECT count(*) FROM dm`, args...).Scan(&n)
		if err != nil {
			return deleted, core.DBErr("evicting memories", err)
		}
		deleted += n
	}
	return deleted, nil
}
