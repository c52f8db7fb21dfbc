package write

import (
	"strings"

	"github.com/engram-dev/engram/internal/memory/core"
)

// expirySQL is NULL (never) for a ttl of 0. now() stays outside the CASE:
// Citus refuses a non-immutable function inside CASE or COALESCE in an
// UPDATE (an interval of NULL seconds makes the sum NULL just the same).
const expirySQL = `now() + make_interval(secs => CASE WHEN $EXP::float8 > 0 THEN $EXP::float8 END)`

// InsertQuery is the SQL of add's insert with its history row, returning
// the memory's columns and the owner's row count: $1 id, $2 owner, $3 agent,
// $4 session, $5 source, $6 category, $7 content, $8 importance, $9 vector,
// $10 flags, $11 ttl in seconds (0: none), $12 details (json), $13 actor id,
// $14 source session, $15 metadata (jsonb; NULL: none), $16 tags (text[];
// NULL: none), $17 the configuration of the stored text vector (text; "":
// none, the tenant is English; core.State.WriteTextConfig) (the
// benchmark's raw side runs exactly this).
//
// The history row takes its values from the parameters, not from ins: on
// Citus a CTE is run as a statement of its own, and an INSERT ... SELECT
// of ins would ship the new row back to the worker through intermediate
// results on a second connection, making every add a two-phase commit
// (issue 30 measured 29 ms per add instead of 11); with VALUES every part
// runs on the transaction's one connection to the tenant's worker.
func (s *Store) InsertQuery() string { return s.insertQuery(false) }

// insertQuery is InsertQuery; with next, it also writes $18 into
// embedding_next (a dual write during a re-embed, core.Next).
func (s *Store) insertQuery(next bool) string {
	col, val := "", ""
	if next {
		col, val = ", embedding_next", ", $18"
	}
	return `WITH ins AS (
			INSERT INTO ` + s.sql.memories + ` AS m (id, owner_id, agent_id, session_id, source, category, content, importance, embedding, flags, expires_at, source_session,
				metadata, tags, tsv_config, tsv_local` + col + `)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, ` + Expiry("$11") + `, $14,
				coalesce($15::jsonb, '{}'::jsonb), coalesce($16::text[], '{}'::text[]), ` + core.TextLocal("$17", "$7") + val + `)
			RETURNING ` + s.sql.insertColumns + `),
		h AS (
			INSERT INTO ` + s.sql.history + ` (memory_id, owner_id, action, actor, actor_id, new_content, details)
			VALUES ($1, $2, 'add', $5, $13, $7, $12))
		SELECT ins.*, (SELECT count(*) FROM ` + s.sql.memories + ` WHERE owner_id = $2) + 1 FROM ins`
}

// Expiry is the expires_at expression of a ttl in seconds bound to param
// ("$11"): NULL (never) for 0.
func Expiry(param string) string {
	return strings.ReplaceAll(expirySQL, "$EXP", param)
}
