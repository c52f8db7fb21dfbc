package memory

import (
	"context"
	"fmt"

	pgv "github.com/pgvector/pgvector-go"
)

// textSearchConfig is the PostgreSQL text search configuration of the
// generated tsv column (migration 1) and of queries.
const textSearchConfig = "english"

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
func (s *Store) Search(ctx context.Context, req SearchRequest) ([]SearchHit, error) {
	fe := &fieldErrors{}
	fe.owner(req.Owner)
	fe.scope(req.Agent, req.Session)
	fe.text("query", req.Query, s.policy.Limits.MaxQueryBytes)
	k := fe.topK(&s.policy, req.TopK)
	fe.categories(&s.policy, req.Categories)
	fe.finite("minScore", req.MinScore)
	mode := req.Mode
	switch mode {
	case "":
		mode = SearchHybrid
	case SearchVector, SearchHybrid, SearchText:
	default:
		fe.add("mode", "%q must be vector, hybrid or text", req.Mode)
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	// The query is redacted like content: it goes to the embedding server,
	// and a secret in it could not match stored (redacted) text anyway.
	req.Query = s.redactor.redacted(req.Query)
	var vec []float32
	if mode != SearchText {
		vecs, err := s.embedder.Embed(ctx, []string{req.Query})
		if err != nil {
			return nil, fmt.Errorf("embedding the query: %w", err)
		}
		vec = vecs[0]
	}
	hits, err := s.searchSQL(ctx, mode, req, vec, k)
	if err != nil {
		return nil, err
	}
	out := hits[:0]
	for _, h := range hits {
		if req.MinScore == 0 || h.Score >= req.MinScore {
			out = append(out, h)
		}
	}
	ids := make([]string, len(out))
	for i, h := range out {
		ids[i] = h.Memory.ID
	}
	s.access.record(ids...)
	return out, nil
}

// searchSQL builds and runs the query of one mode.
func (s *Store) searchSQL(ctx context.Context, mode SearchMode, req SearchRequest, vec []float32, k int) ([]SearchHit, error) {
	a := &args{}
	where := s.ownerMatch(a.add(req.Owner)) + ` AND m.active AND (m.expires_at IS NULL OR m.expires_at > now())`
	where += scopeFilter(a, req.Agent, req.Session)
	if req.ExcludeFlagged {
		where += notFlagged
	}
	if len(req.Categories) > 0 {
		where += ` AND m.category = ANY(` + a.add(req.Categories) + `)`
	}
	decay := decayExpr(a.add(s.decayNames), a.add(s.decaySeconds))
	from := s.sql.memories + ` AS m`
	var vs, ts, order string
	if mode != SearchText {
		qv := a.add(pgv.NewVector(vec))
		vs = `1 - (m.embedding <=> ` + qv + `)`
		order = `m.embedding <=> ` + qv
	}
	if mode != SearchVector {
		// Any query word may match (OR): ranking, not filtering, is the point.
		from += `, (SELECT replace(plainto_tsquery('` + textSearchConfig + `', ` + a.add(req.Query) + `)::text, ' & ', ' | ')::tsquery) AS q(q)`
		ts = `CASE WHEN m.tsv @@ q.q THEN ts_rank_cd(m.tsv, q.q, 32) ELSE 0 END`
	}
	w := s.policy.Search
	switch mode {
	case SearchVector:
		ts = `0::float8`
	case SearchText:
		vs = `0::float8`
		where += ` AND m.tsv @@ q.q`
		order = `ts DESC, m.updated_at DESC`
	case SearchHybrid:
	}
	sql := `SELECT ` + memoryColumns + `, ` + vs + ` AS vs, ` + ts + ` AS ts, ` + decay + ` AS ds
		FROM ` + from + ` WHERE ` + where
	if mode == SearchHybrid {
		// ORDER BY cannot use output names inside an expression: rank the
		// scored rows in an outer query.
		sql = `SELECT * FROM (` + sql + `) AS r ORDER BY ` + a.add(w.VectorWeight) + `::float8 * r.vs + ` +
			a.add(w.TextWeight) + `::float8 * r.ts + ` + a.add(w.DecayWeight) + `::float8 * r.ds DESC, r.id LIMIT ` + a.add(k)
	} else {
		sql += ` ORDER BY ` + order + ` LIMIT ` + a.add(k)
	}
	rows, err := s.pool.Query(ctx, sql, a.list...)
	if err != nil {
		return nil, s.dbErr("searching", err)
	}
	defer rows.Close()
	hits := []SearchHit{}
	for rows.Next() {
		var h SearchHit
		m, err := scanMemory(rows, &h.VectorScore, &h.TextScore, &h.DecayScore)
		if err != nil {
			return nil, s.dbErr("searching", err)
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
		return nil, s.dbErr("searching", err)
	}
	return hits, nil
}
