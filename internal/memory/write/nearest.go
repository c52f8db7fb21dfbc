package write

// nearestSQL is add's Neighbour lookup among the owner's rows that are not
// superseded and not about to be purged: the nearest active row by vector
// (an index-only scan of the covering index) and the active row with the
// identical text (the md5 key of the same index, checked against the
// text); the same two among the inactive rows deactivated at or after
// since (SQL of a timestamp: the purge will not delete them soon), read
// through the inactive-owner index of migration 12 and the heap (the
// covering index holds active rows only, so deactivating a row adds no
// 1.6 kB tuple to it). Then the one to compare — the identical text first —
// is read from the heap and, in a transaction, locked. The nearest of the
// union is the nearest of all: the branches cover every row compared.
//
// The inactive branches select rows by their deactivation time, not by
// `NOT active`: a row has one exactly when it is inactive (deactivation sets
// it, reactivation clears it), and so their condition implies the
// predicate of the inactive-owner index but not that of the purge's index
// on deactivation time (`NOT active`). With `NOT active`, the planner could
// read the purge's index for one owner's lookup: with statistics from
// before a burst of deactivations (decay, expire) it estimated no recent
// row and scanned every recently deactivated row of the tenant, 1.3 s per
// add in the jobs benchmark. Only indexes led by owner_id can serve it now.
func nearestSQL(memories, since string, lock bool) string {
	active := `m.owner_id = $1 AND m.active AND m.superseded_by IS NULL`
	inactive := `m.owner_id = $1 AND m.deactivated_at IS NOT NULL AND m.superseded_by IS NULL
				AND m.deactivated_at >= ` + since
	sql := `WITH c AS MATERIALIZED (
			(SELECT m.id FROM ` + memories + ` AS m WHERE ` + active + `
			ORDER BY m.embedding <=> $2 LIMIT 1)
			UNION ALL
			(SELECT m.id FROM ` + memories + ` AS m WHERE ` + active + `
				AND md5(m.content) = md5($3) AND m.content = $3 LIMIT 1)
			UNION ALL
			(SELECT m.id FROM ` + memories + ` AS m WHERE ` + inactive + `
			ORDER BY m.embedding <=> $2 LIMIT 1)
			UNION ALL
			(SELECT m.id FROM ` + memories + ` AS m WHERE ` + inactive + `
				AND m.content = $3 LIMIT 1))
		SELECT m.id::text, m.content, m.category, m.agent_id, m.session_id, m.active, m.updated_at,
			1 - (m.embedding <=> $2), m.content = $3
		FROM ` + memories + ` AS m
		WHERE m.id IN (SELECT id FROM c)
		ORDER BY ` + neighbourOrder + `
		LIMIT 1`
	if lock {
		sql += ` FOR UPDATE OF m`
	}
	return sql
}

// neighbourOrder ranks the rows add's lookup compares (alias m, $2 the
// vector, $3 the text): an identical text first and, among identical
// texts, an active row before an inactive one — else adding a text that
// both a deleted row and an active row (changed to it by an update) hold
// could revive the deleted one beside the active one; then the nearest,
// then the id, so the choice never depends on a plan.
const neighbourOrder = `m.content = $3 DESC, (m.content = $3 AND NOT m.active), m.embedding <=> $2, m.id`

// legacyNearestSQL is the one-phase Neighbour lookup over the owner index,
// for vectors too large for the covering index.
func legacyNearestSQL(memories, cond string, lock bool) string {
	sql := `SELECT m.id::text, m.content, m.category, m.agent_id, m.session_id, m.active, m.updated_at,
			1 - (m.embedding <=> $2), m.content = $3
		FROM ` + memories + ` AS m
		WHERE m.owner_id = $1 AND m.superseded_by IS NULL AND NOT (` + cond + `)
		ORDER BY ` + neighbourOrder + `
		LIMIT 1`
	if lock {
		sql += ` FOR UPDATE OF m`
	}
	return sql
}
