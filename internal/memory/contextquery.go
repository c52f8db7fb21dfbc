package memory

import (
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// ContextQuery is the SQL and arguments of context's candidate query for
// req with the query embedding vec (nil without a query) and a budget of
// budget tokens (the benchmark's raw side runs exactly this). Columns: id,
// category, content, value, total.
func (s *Store) ContextQuery(req ContextRequest, vec []float32, budget int) (string, []any) {
	a := &core.Args{}
	where := (*longTerm)(s).ownerMatch(a.Add(req.Owner)) + ` AND m.active AND (m.expires_at IS NULL OR m.expires_at > now())` + notFlagged
	where += scopeFilter(a, req.Agent, req.Session)
	if f := filterSQL(&core.FieldErrors{}, a, req.Filter); f != "" { // checked by Context
		where += ` AND ` + f
	}
	pinned := a.Add((*reader)(s).pinnedCategories()) + `::text[]`
	// float8 arithmetic (m.importance / 10.0 would be numeric, slow per
	// row); importance/10 and 0.25*importance/10 round to the same doubles.
	value := `m.importance::float8 / 10 * ` + s.sql.decayExpr(a.Add(s.decayNames), a.Add(s.decaySeconds))
	if vec != nil {
		relevance := `(1 - (m.embedding <=> ` + a.Add(pgv.NewVector(vec)) + `)) + 0.25 * ` + value
		value = `CASE WHEN m.category = ANY(` + pinned + `) THEN ` + value + ` ELSE ` + relevance + ` END`
	}
	perCategory, perPinned := contextLimits(budget)
	sql := `SELECT id, category, content, v, total FROM (
			SELECT m.id::text AS id, m.category, m.content, v.v, m.updated_at,
				row_number() OVER (PARTITION BY m.category ORDER BY v.v DESC, m.updated_at DESC, m.id) AS rank,
				count(*) OVER () AS total
			FROM ` + s.sql.memories + ` AS m, LATERAL (SELECT ` + value + ` AS v) AS v
			WHERE ` + where + `) AS c
		WHERE rank <= CASE WHEN category = ANY(` + pinned + `) THEN ` + a.Add(perPinned) + `::int ELSE ` + a.Add(perCategory) + `::int END
		ORDER BY v DESC, updated_at DESC, id`
	return sql, a.List
}
