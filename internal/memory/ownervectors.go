package memory

import (
	"github.com/engram-dev/engram/internal/tenant"
)

// The owner-local read path (issue 17). Migration 12 (replacing migration
// 7's) has a covering index memories_active_vectors_idx on (owner_id,
// md5(content)) INCLUDE (embedding, id, expires_at) WHERE active AND
// superseded_by IS NULL. An exact top-K then reads the owner's vectors by
// an index-only scan (about one index page per four rows, no scattered heap pages) and fetches only
// the K winners from the heap by primary key; the wide work (every column,
// decay) is done for those K rows only. Every row of the owner is still
// compared, so recall stays 1.0.
//
// Vectors of more than tenant.OwnerVectorsMaxDims dimensions do not fit in a
// btree tuple: their tenants have no such index and keep the one-phase
// queries over the owner index (ownerVectors false).

// ownerVectorsIndex is the covering index of migration 12.
const ownerVectorsIndex = "memories_active_vectors_idx"

// ownerVectors reports whether vectors of dims dimensions take the
// owner-local path.
func ownerVectors(dims int) bool { return dims > 0 && dims <= tenant.OwnerVectorsMaxDims }

// searchable is the condition (alias m) of the rows search and context
// read: active, not expired. superseded_by IS NULL adds nothing (a
// superseded row is never active) but lets the planner prove the partial
// covering index applies.
const searchable = `m.active AND m.superseded_by IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())`

// candidatesFor is how many nearest rows the first phase keeps when filters
// the covering index cannot evaluate (agent, session, category, flags)
// narrow the result. Agent-facing search always filters (flagged rows are
// left out), and the filters rarely reject a near row, so the first attempt
// takes K and a small margin: about K heap rows are read, as without a
// filter. When fewer than K pass and the attempt was full, searchSQL widens
// to 4K+32, then runs the one-phase query (vectorCandidates), so the result
// stays the exact top-K.
func candidatesFor(k int, filtered bool) int {
	if !filtered {
		return k
	}
	return k + k/4 + 2
}

// vectorCandidates are the candidate counts searchSQL tries, the first
// being first's (0: the one-phase query, no attempts).
func vectorCandidates(k, first int) []int {
	if first == 0 || first == k {
		return []int{first}
	}
	return []int{first, max(first, 4*k+32)}
}

// vectorSearchSQL is the two-phase vector search: the candidates by an
// index-only scan of the owner's vectors, then their rows by primary key,
// filtered and scored. The last column counts the candidates, so the caller
// knows whether the filters may have left out rows beyond them. where is
// the filter beyond owner and searchable (agent, session, categories,
// flags), "" when none; columns are queries.columns; decay is decayExpr's
// SQL; q is a placeholder; owner is the owner condition on alias m
// (Store.ownerMatch: with global categories the owner's rows and the
// tenant-wide ones under GlobalOwner, both read from the covering index,
// whose leading column is owner_id).
func vectorSearchSQL(memories, columns, owner, q, where, decay, limit, candidates string) string {
	return `WITH c AS MATERIALIZED (
			SELECT m.id, m.embedding <=> ` + q + ` AS d FROM ` + memories + ` AS m
			WHERE ` + owner + ` AND ` + searchable + `
			ORDER BY m.embedding <=> ` + q + ` LIMIT ` + candidates + `)
		SELECT ` + columns + `, 1 - c.d AS vs, 0::float8 AS ts, ` + decay + ` AS ds, (SELECT count(*) FROM c)
		FROM c JOIN ` + memories + ` AS m ON m.id = c.id
		WHERE true` + where + `
		ORDER BY c.d LIMIT ` + limit
}

// CeilingSQL is the least any exact per-owner vector search must do, the
// first phase alone: the ids of the owner's top $3 by cosine distance to
// $2, on the best access path the schema has. The benchmark measures it
// beside the service (the "ceiling" row).
func CeilingSQL(schema string) string {
	return `SELECT m.id FROM ` + newQueries(schema).memories + ` AS m
		WHERE m.owner_id = $1 AND ` + searchable + `
		ORDER BY m.embedding <=> $2 LIMIT $3`
}
