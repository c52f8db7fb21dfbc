package memory

import (
	"context"
	"math"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Hybrid search on the owner-local path (issue 17).
//
// The score of a row is wv*vs + wt*ts + wd*ds over all the owner's
// searchable rows (vs = 1 - cosine distance, ts = ts_rank_cd of the OR
// query, ds = decay), ranked by score DESC, id. Computing it for every row
// reads every heap row of the owner (text rank and decay need the row). The
// owner-local query computes it only for the rows that can be in the top K:
//
//	candidates = the owner's N nearest rows by vector distance (an
//	             index-only scan of the covering index of migration 12)
//	           ∪ the owner's rows matching the query's words (the owner's
//	             text index of migration 12, ownertext.go)
//
// and reads only those from the heap by primary key.
//
// The bound. Let d_N be the largest distance among the N nearest rows. A row
// r that is not a candidate does not match the query (ts(r) = 0: the CASE of
// the text score gives exactly 0 to rows that do not match), has distance
// d(r) >= d_N (it is not among the N nearest; a tie with d_N is allowed), and
// ds(r) <= 1 (decayExpr is exp of a value <= 0, or 1). The weights are in
// [0, 1] (Policy.validate). So, in exact arithmetic,
//
//	score(r) = wv*(1-d(r)) + wt*0 + wd*ds(r) <= wv*(1-d_N) + wt*0 + wd*1 = B.
//
// PostgreSQL evaluates both sides with the same float8 operations in the
// same order, and IEEE rounding is monotonic (a <= b implies fl(a) <= fl(b)
// for subtraction from 1, multiplication by a weight >= 0 and addition), so
// the computed score(r) <= the computed B as well. If at least K candidates
// pass the filters and the K-th best of them has a score > B, no
// non-candidate can reach the top K, not even through the id tie-break: the
// candidates' top K is the exact top K. Otherwise (fewer than K passed, or
// the K-th score <= B) and the vector side was full (N rows: there may be
// rows beyond it), the query is run again with 4N, and then the one-phase
// query over all the owner's rows answers. When the vector side holds fewer
// than N rows, every searchable row of the owner is a candidate and the
// result is exact as it is.
//
// A row whose distance is NaN (a zero vector from an external embedder) has
// a NaN score, which PostgreSQL sorts above every number; such rows are
// taken into the candidates first, and d_N is the largest distance that is
// not NaN. (OFFSET 0 keeps the distance computed once per row: pulled up,
// the sort key would compute it twice more.)

// hybridFirstCandidates is N of the first attempt: the K nearest rows and
// a margin, enough when the K best rows by score are mostly the nearest.
func hybridFirstCandidates(k int) int { return 2*k + 10 }

// hybridWiden is the factor of N between attempts.
const hybridWiden = 4

// hybridAttempts is how many owner-local attempts run before the one-phase
// query answers.
const hybridAttempts = 2

// hybridSQL is one owner-local attempt of hybrid search with n vector
// candidates. Its rows are memoryColumns, vs, ts, ds, then the score, the
// bound B (NULL when no distance is known) and the number of vector
// candidates, ordered by score DESC, id and limited to k.
func (s *reader) hybridSQL(req SearchRequest, vec []float32, k, n int) searchQuery {
	a := &core.Args{}
	owner, filter := s.searchFilter(a, req)
	decay := s.sql.decayExpr(a.Add(s.decayNames), a.Add(s.decaySeconds))
	qv := a.Add(pgv.NewVector(vec))
	w := s.core.Policy.Search
	wv, wt, wd := a.Add(w.VectorWeight)+`::float8`, a.Add(w.TextWeight)+`::float8`, a.Add(w.DecayWeight)+`::float8`
	score := wv + ` * r.vs + ` + wt + ` * r.ts + ` + wd + ` * r.ds`
	tv := textVector(req.textConfig)
	sql := `WITH q AS MATERIALIZED (` + s.textQueries(a, req) + `),
		v AS MATERIALIZED (
			SELECT id, d FROM (
				SELECT m.id, m.embedding <=> ` + qv + ` AS d FROM ` + s.sql.memories + ` AS m
				WHERE ` + owner + ` AND ` + searchable + ` OFFSET 0) AS x
			ORDER BY CASE WHEN d = 'NaN'::float8 THEN -1 ELSE d END
			LIMIT ` + a.Add(n) + `),
		t AS MATERIALIZED (
			SELECT m.id FROM ` + s.sql.memories + ` AS m
			WHERE ` + ownerTextOnly(owner) + ` AND ` + searchable + ` AND ` + tv + ` @@ (SELECT q FROM q)
				AND ` + ownerText(req.textConfig) + ` @@ (SELECT qo FROM q)),
		b AS (SELECT count(*) AS n, max(d) FILTER (WHERE d <> 'NaN'::float8) AS dn FROM v),
		r AS (
			SELECT ` + s.sql.columns + `, 1 - (m.embedding <=> ` + qv + `) AS vs,
				` + core.TextRank(req.textConfig, tv, "q.q") + ` AS ts, ` + decay + ` AS ds
			FROM (SELECT id FROM v UNION SELECT id FROM t) AS c
				JOIN ` + s.sql.memories + ` AS m ON m.id = c.id, q
			WHERE true` + filter + `)
		SELECT r.*, ` + score + ` AS score, ` + wv + ` * (1 - b.dn) + ` + wt + ` * 0 + ` + wd + ` * 1 AS bound, b.n
		FROM r, b
		ORDER BY ` + score + ` DESC, r.id LIMIT ` + a.Add(k)
	return searchQuery{sql: sql, args: a.List, candidates: n}
}

// hybridResult is what one owner-local attempt returned besides the hits.
type hybridResult struct {
	hits       []SearchHit
	lastScore  float64  // score of the last hit as PostgreSQL computed it
	bound      *float64 // B; nil when no distance was known
	candidates int      // rows of the vector side
}

// exact reports whether an attempt with n vector candidates returned the
// exact top k (see the proof above).
func (r hybridResult) exact(k, n int) bool {
	if len(r.hits) == 0 {
		// No row tells how many vector candidates there were: the
		// one-phase query decides (an empty owner costs nothing there).
		return false
	}
	if r.candidates < n {
		return true // every searchable row of the owner was a candidate
	}
	if len(r.hits) < k || r.bound == nil || math.IsNaN(*r.bound) {
		return false
	}
	return r.lastScore > *r.bound
}

// hybridAttempts runs hybrid search on the owner-local path on db: attempts
// with a growing candidate set while the bound cannot prove the result
// exact, then the one-phase query. It also returns which query answered: 0
// and 1 the owner-local attempts, hybridAttempts the one-phase query.
func (s *reader) hybridAttempts(ctx context.Context, db core.RowsQuerier, req SearchRequest, vec []float32, k int) ([]SearchHit, int, error) {
	n := hybridFirstCandidates(k)
	for attempt := range hybridAttempts {
		r, err := s.runHybrid(ctx, db, s.hybridSQL(req, vec, k, n))
		if err != nil {
			return nil, attempt, err
		}
		if r.exact(k, n) {
			return r.hits, attempt, nil
		}
		if len(r.hits) == 0 {
			break
		}
		n *= hybridWiden
	}
	hits, _, err := s.runSearch(ctx, db, SearchHybrid, s.buildSearch(SearchHybrid, req, vec, k, true))
	return hits, hybridAttempts, err
}

// runHybrid runs one owner-local attempt.
func (s *reader) runHybrid(ctx context.Context, db core.RowsQuerier, q searchQuery) (hybridResult, error) {
	rows, err := db.Query(ctx, q.sql, q.args...)
	if err != nil {
		return hybridResult{}, core.DBErr("searching", err)
	}
	defer rows.Close()
	w := s.core.Policy.Search
	res := hybridResult{hits: []SearchHit{}}
	for rows.Next() {
		var h SearchHit
		var bound *float64
		m, err := scanMemory(rows, &h.VectorScore, &h.TextScore, &h.DecayScore, &res.lastScore, &bound, &res.candidates)
		if err != nil {
			return hybridResult{}, core.DBErr("searching", err)
		}
		h.Memory = m
		h.Score = w.VectorWeight*h.VectorScore + w.TextWeight*h.TextScore + w.DecayWeight*h.DecayScore
		res.hits, res.bound = append(res.hits, h), bound
	}
	if err := rows.Err(); err != nil {
		return hybridResult{}, core.DBErr("searching", err)
	}
	return res, nil
}
