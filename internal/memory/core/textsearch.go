package core

// TextSearchConfig is the PostgreSQL text search configuration of the
// generated tsv columns (migration 1) and of queries.
const TextSearchConfig = "english"

// OrQuery is the tsquery (SQL) of text search for the query text in ph: any
// of its words may match (OR), since ranking, not filtering, is the point.
func OrQuery(ph string) string {
	return `replace(plainto_tsquery('` + TextSearchConfig + `', ` + ph + `)::text, ' & ', ' | ')::tsquery`
}
