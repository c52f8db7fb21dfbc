package memory

import (
	"context"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// notFlagged is the filter (on alias m) that leaves out memories the
// injection guard flagged: context never renders them, and agent-facing
// search and list results leave them out on request.
const notFlagged = ` AND NOT ('` + FlagInjection + `' = ANY(m.flags))`

// Search returns owner's top-K active, unexpired memories for a query.
// Every mode scans exactly the owner's rows through the owner index, so the
// result is the owner's true top-K however large the tenant is (no
// approximate index, no post-filter that returns too few rows).
//
//   - vector: cosine similarity of the query embedding.
//   - text:   full-text rank (English stemming, any query word may match).
//   - hybrid: vectorWeight*similarity + textWeight*text rank + decayWeight*decay.
//
// Search is the ranking for callers in the process; an answer to a client
// is SearchAnswer's, within the byte cap.
func (s *Store) Search(ctx context.Context, req SearchRequest) ([]SearchHit, error) {
	res, err := (*reader)(s).search(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	return res.Results, nil
}

// SearchAnswer is Search as an answer of the API: the results, best first,
// while their JSON fits the byte cap (req.MaxBytes lowers it); the
// lowest-ranked rest are counted in Omitted. Only the results given count
// as read (access statistics).
func (s *Store) SearchAnswer(ctx context.Context, req SearchRequest) (*SearchResult, error) {
	res := &SearchResult{Results: []SearchHit{}}
	return (*reader)(s).search(ctx, req, core.NewAnswerBytes((*reader)(s).answerCap(req.MaxBytes), res))
}

// search ranks and keeps the results that fit b (nil: all of them).
func (s *reader) search(ctx context.Context, req SearchRequest, b *core.AnswerBytes) (*SearchResult, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	fe.Scope(req.Agent, req.Session)
	k := fe.TopK(&s.core.Policy, req.TopK)
	fe.Categories(&s.core.Policy, req.Categories)
	fe.Finite("minScore", req.MinScore)
	mode := req.Mode
	switch mode {
	case "":
		mode = SearchHybrid
	case SearchVector, SearchHybrid, SearchText:
	default:
		fe.Add("mode", "%q must be vector, hybrid or text", req.Mode)
	}
	s.checkQuery(fe, req, mode)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	// The query is redacted like content: it goes to the embedding server,
	// and a secret in it could not match stored (redacted) text anyway.
	req.Query = s.core.Redactor.Redacted(req.Query)
	if mode != SearchVector {
		var err error
		if req.textConfig, err = s.core.TextConfig(ctx); err != nil {
			return nil, err
		}
	}
	vec, err := s.queryVector(ctx, req, mode)
	if err != nil {
		return nil, err
	}
	plan := s.planRerank(req, mode)
	hits, err := s.searchSQL(ctx, mode, req, vec, plan.fetch(k))
	if err != nil {
		return nil, err
	}
	out := hits[:0]
	for _, h := range hits {
		if req.MinScore == 0 || h.Score >= req.MinScore {
			out = append(out, h)
		}
	}
	res := &SearchResult{}
	if s.reranker != nil {
		reason := plan.reason
		if plan.on {
			out, reason = s.rerank(ctx, plan, req.Query, out, k)
		}
		res.Reranked, res.RerankReason = new(reason == ""), reason
	}
	res.Results = out
	if n := core.FitRanked(b, out); n < len(out) {
		res.Results, res.Truncated, res.Omitted = out[:n], true, len(out)-n
	}
	ids := make([]string, len(res.Results))
	for i, h := range res.Results {
		ids[i] = h.Memory.ID
	}
	s.access.record(ids...)
	return res, nil
}

// searchQuery is the SQL of one search with its arguments. candidates > 0
// marks the two-phase vector query (vectorSearchSQL): its rows carry the
// number of candidates as a last column.
type searchQuery struct {
	sql        string
	args       []any
	candidates int
}

// buildSearch builds the query of one mode: vector search on the
// owner-local path when the vectors fit the covering index, else (and for
// hybrid and text) the one-phase query over the owner's rows.
// legacy forces the one-phase query (searchSQL falls back to it).
func (s *reader) buildSearch(mode SearchMode, req SearchRequest, vec []float32, k int, legacy bool) searchQuery {
	a := &core.Args{}
	owner, filter := s.searchFilter(a, req)
	if mode == SearchVector && !legacy && ownerVectors(len(vec)) {
		return s.buildVectorSearch(req, vec, k, candidatesFor(k, filter != ""))
	}
	decay := s.sql.decayExpr(a.Add(s.decayNames), a.Add(s.decaySeconds))
	where := owner + ` AND ` + searchable + filter
	from := s.sql.memories + ` AS m`
	var vs, ts, order string
	if mode != SearchText {
		qv := a.Add(pgv.NewVector(vec))
		vs = `1 - (m.embedding <=> ` + qv + `)`
		order = `m.embedding <=> ` + qv
	}
	if mode != SearchVector {
		from += `, (` + s.textQueries(a, req) + `) AS q`
		ts = core.TextRank(req.textConfig, textVector(req.textConfig), "q.q")
	}
	w := s.core.Policy.Search
	switch mode {
	case SearchVector:
		ts = `0::float8`
	case SearchText:
		vs = `0::float8`
		where = ownerTextOnly(owner) + ` AND ` + searchable + filter + ` AND ` + textVector(req.textConfig) + ` @@ q.q AND ` + ownerText(req.textConfig) + ` @@ q.qo`
		order = `ts DESC, m.updated_at DESC`
	case SearchHybrid:
	}
	sql := `SELECT ` + s.sql.columns + `, ` + vs + ` AS vs, ` + ts + ` AS ts, ` + decay + ` AS ds
		FROM ` + from + ` WHERE ` + where
	if mode == SearchHybrid {
		// ORDER BY cannot use output names inside an expression: rank the
		// scored rows in an outer query.
		sql = `SELECT * FROM (` + sql + `) AS r ORDER BY ` + a.Add(w.VectorWeight) + `::float8 * r.vs + ` +
			a.Add(w.TextWeight) + `::float8 * r.ts + ` + a.Add(w.DecayWeight) + `::float8 * r.ds DESC, r.id LIMIT ` + a.Add(k)
	} else {
		sql += ` ORDER BY ` + order + ` LIMIT ` + a.Add(k)
	}
	return searchQuery{sql: sql, args: a.List}
}

// searchFilter is the owner condition of a search (the owner's rows and,
// when the policy has global categories, the tenant-wide ones: ownerMatch)
// and its filters beyond it (agent, session, flags, categories; "" when
// none), both on alias m.
func (s *reader) searchFilter(a *core.Args, req SearchRequest) (owner, filter string) {
	owner = (*longTerm)(s).ownerMatch(a.Add(req.Owner))
	filter = scopeFilter(a, req.Agent, req.Session)
	if req.ExcludeFlagged {
		filter += notFlagged
	}
	if len(req.Categories) > 0 {
		filter += ` AND m.category = ANY(` + a.Add(req.Categories) + `)`
	}
	if f := filterSQL(&core.FieldErrors{}, a, req.Filter); f != "" { // checked by search
		filter += ` AND ` + f
	}
	return owner, filter
}

// buildVectorSearch is the two-phase vector search with n candidates.
func (s *reader) buildVectorSearch(req SearchRequest, vec []float32, k, n int) searchQuery {
	a := &core.Args{}
	owner, filter := s.searchFilter(a, req)
	decay := s.sql.decayExpr(a.Add(s.decayNames), a.Add(s.decaySeconds))
	qv := a.Add(pgv.NewVector(vec))
	sql := vectorSearchSQL(s.sql.memories, s.sql.columns, owner, qv, filter, decay, a.Add(k), a.Add(n))
	return searchQuery{sql: sql, args: a.List, candidates: n}
}

// SearchQuery is the SQL and arguments the store runs for req with the
// query embedding vec (the benchmark's raw side runs exactly this): for
// hybrid search and filtered vector search on the owner-local path, the
// first attempt, which answers unless its bound check fails; with a
// Filter (metadata, tags, timestamps), the one-phase query searchIn runs.
func (s *Store) SearchQuery(req SearchRequest, vec []float32) (string, []any) {
	mode := req.Mode
	if mode == "" {
		mode = SearchHybrid
	}
	if req.Filter != nil { // searchIn: a filtered search runs the one-phase query
		q := (*reader)(s).buildSearch(mode, req, vec, req.TopK, true)
		return q.sql, q.args
	}
	if mode == SearchHybrid && ownerVectors(len(vec)) {
		q := (*reader)(s).hybridSQL(req, vec, req.TopK, hybridFirstCandidates(req.TopK))
		return q.sql, q.args
	}
	q := (*reader)(s).buildSearch(mode, req, vec, req.TopK, false)
	return q.sql, q.args
}

// searchSQL runs the query of one mode. When filters the covering index
// cannot see left fewer than k of a full set of candidates, rows beyond the
// candidates may qualify: a wider set is tried (vectorCandidates), then the
// one-phase query answers. Hybrid search has its own attempts (hybridAttempts).
func (s *reader) searchSQL(ctx context.Context, mode SearchMode, req SearchRequest, vec []float32, k int) ([]SearchHit, error) {
	return s.searchIn(ctx, s.core.Pool, mode, req, vec, k)
}

// searchIn is searchSQL on db (tests compare two paths in one transaction,
// where now() and so the decay scores are the same).
func (s *reader) searchIn(ctx context.Context, db core.RowsQuerier, mode SearchMode, req SearchRequest, vec []float32, k int) ([]SearchHit, error) {
	if req.Filter != nil {
		// A metadata or tags filter is often selective: the owner-local
		// attempts would read candidates it mostly rejects before the
		// one-phase query answered anyway. That query ranks only the rows
		// the filter keeps, which the GIN indexes of migration 17 find.
		hits, _, err := s.runSearch(ctx, db, mode, s.buildSearch(mode, req, vec, k, true))
		return hits, err
	}
	if mode == SearchHybrid && ownerVectors(len(vec)) {
		hits, _, err := s.hybridAttempts(ctx, db, req, vec, k)
		return hits, err
	}
	q := s.buildSearch(mode, req, vec, k, false)
	for _, n := range vectorCandidates(k, q.candidates) {
		if n != q.candidates {
			q = s.buildVectorSearch(req, vec, k, n)
		}
		hits, candidates, err := s.runSearch(ctx, db, mode, q)
		// No row: the candidate count is unknown, the next attempt decides.
		if err != nil || q.candidates == 0 || len(hits) >= k || (len(hits) > 0 && candidates < q.candidates) {
			return hits, err
		}
	}
	hits, _, err := s.runSearch(ctx, db, mode, s.buildSearch(mode, req, vec, k, true))
	return hits, err
}

// runSearch runs a built search and scores its rows; it also returns the
// candidate count of a two-phase query.
func (s *reader) runSearch(ctx context.Context, db core.RowsQuerier, mode SearchMode, q searchQuery) ([]SearchHit, int, error) {
	rows, err := db.Query(ctx, q.sql, q.args...)
	if err != nil {
		return nil, 0, core.DBErr("searching", err)
	}
	defer rows.Close()
	w := s.core.Policy.Search
	hits := []SearchHit{}
	candidates := 0
	for rows.Next() {
		var h SearchHit
		extra := []any{&h.VectorScore, &h.TextScore, &h.DecayScore}
		if q.candidates > 0 {
			extra = append(extra, &candidates)
		}
		m, err := scanMemory(rows, extra...)
		if err != nil {
			return nil, 0, core.DBErr("searching", err)
		}
		h.Memory = m
		switch mode {
		case SearchVector:
			h.Score = h.VectorScore
		case SearchText:
			h.Score = h.TextScore
		default:
			h.Score = w.VectorWeight*h.VectorScore + w.TextWeight*h.TextScore + w.DecayWeight*h.DecayScore
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, core.DBErr("searching", err)
	}
	return hits, candidates, nil
}
