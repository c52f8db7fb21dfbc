package memory

import "github.com/engram-dev/engram/internal/memory/core"

// The owner's text index (migration 12): a GIN index over each active row's
// words plus one lexeme naming its owner, "owner <md5 of the owner id>".
// The text parser never produces a lexeme with a space, so no memory's text
// or query can contain it. A query for the owner's rows matching q ANDs
// that lexeme into q: the index then returns only the owner's matching rows,
// without the planner having to combine it with the owner index. The index
// answers `ownerText @@ ownerTextQuery(...)`, a superset test; queries keep
// `m.tsv @@ q` (textVector: the row's words under the tenant's text search
// configuration) beside it, so the rows returned are exactly those whose
// text matches q (q is a disjunction of words and phrases: adding a lexeme
// to a row's words never turns a match into a miss).

// ownerText is the indexed expression (alias m) of the text index of the
// tenant's text search configuration config (migration 12 for English,
// tenant.ensureTextSearch for the others).
func ownerText(config string) string { return core.OwnerText(config, "m.") }

// textVector is the tsvector of a memory (alias m) under config: m.tsv for
// English, the stored m.tsv_local for the others (core.TextVector).
func textVector(config string) string { return core.TextVector(config, "m.") }

// ownerLexeme is the tsquery of the owner lexeme of the owner in ph.
func ownerLexeme(ph string) string {
	return `('''owner ' || md5(` + ph + `::text) || '''')::tsquery`
}

// ownerTextQuery is the tsquery (SQL) the index is searched with for the
// text query q (SQL of a tsquery) of the owner in ph: q AND the owner's
// lexeme, or with global categories, the owner's or GlobalOwner's. An empty
// q (only stop words) stays empty: it matches nothing, and the index
// returns nothing for it, where q AND the lexeme would return every row of
// the owner for `m.tsv @@ q` to reject.
func (s *reader) ownerTextQuery(ph, q string) string {
	owners := ownerLexeme(ph)
	if s.core.Policy.HasGlobal() {
		owners = `(` + owners + ` || ` + ownerLexeme(`'`+GlobalOwner+`'`) + `)`
	}
	return `CASE WHEN numnode(` + q + `) = 0 THEN ` + q + ` ELSE ` + q + ` && ` + owners + ` END`
}

// textQueries is a one-row SELECT of req's text query: q, the OR query the
// rows' words are tested and ranked with, and qo, the same with the owner's
// lexeme for the owner's text index (ownerTextQuery).
func (s *reader) textQueries(a *core.Args, req SearchRequest) string {
	return `SELECT x AS q, ` + s.ownerTextQuery(a.Add(req.Owner), "x") + ` AS qo FROM (SELECT ` + core.OrQuery(req.textConfig, a.Add(req.Query)) + ` AS x) AS x`
}

// ownerTextOnly is the owner condition owner of a query that the owner's
// text index answers, written so that no btree index can take it: the
// planner estimates a text match it cannot see (the query is computed in
// the statement) at a fixed fraction of the table and would otherwise read
// the owner's rows through the owner index and test each one's words,
// about 1,000 heap rows for a search that needs the few that match. The
// condition still filters every row the text index returns.
func ownerTextOnly(owner string) string { return `(` + owner + `) IS TRUE` }
