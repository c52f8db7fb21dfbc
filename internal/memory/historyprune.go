package memory

// A memory's history grows by a row with every update and merge, and an
// agent may update its own memory as often as the rate limit lets it
// (issue 26's review: 1,000 PATCHes, 3.3 MB of history, never pruned). The
// writes that can repeat on one memory — an update, a merge or a
// reactivation by add, an arbiter's update — prune its history in the
// same statement: it keeps the row that created the memory (who wrote it
// first) and the newest limits.maxHistoryPerMemory rows. The other rows a
// memory gets (delete, supersede, expire, forget, compaction) come at most
// once between two such writes, since each ends the memory's active life.

// pruneHistorySQL is a data-modifying CTE, named ph, for a statement whose
// CTE upd updates memory idParam and whose CTE h adds one history row for
// it. Every CTE reads the rows as they were before the statement, so the
// new row is not among them: ph keeps the newest offsetParam (= maxHistory
// − 1, historyOffset) rows besides the first, and with the new row the
// newest maxHistory remain. It deletes nothing when upd updated nothing.
func (s *Store) pruneHistorySQL(idParam, offsetParam string) string {
	h := s.sql.history
	return `ph AS (
			DELETE FROM ` + h + ` AS ph
			WHERE ph.memory_id = ` + idParam + ` AND EXISTS (SELECT 1 FROM upd)
				AND ph.id > (SELECT min(f.id) FROM ` + h + ` AS f WHERE f.memory_id = ` + idParam + `)
				AND ph.id <= (SELECT k.id FROM ` + h + ` AS k WHERE k.memory_id = ` + idParam + `
					ORDER BY k.id DESC OFFSET ` + offsetParam + ` LIMIT 1))`
}

// historyOffset is the argument of pruneHistorySQL's offsetParam.
func (s *Store) historyOffset() int { return s.policy.Limits.MaxHistoryPerMemory - 1 }
