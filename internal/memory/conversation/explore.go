package conversation

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

const (
	// DefaultExpandTokens is the cap of ExpandSummary when none is given.
	DefaultExpandTokens = 20_000
	// MaxExpandTokens is the largest cap ExpandSummary accepts.
	MaxExpandTokens = 1_000_000
	// MaxHistoryResults bounds SearchHistory (also its default).
	MaxHistoryResults = 20
	// MaxSnippetChars bounds the snippet of a history hit (characters, not bytes).
	MaxSnippetChars = 500
	expandPage      = 1000
)

// summaryKey checks an owner and a summary id.
func summaryKey(fe *core.FieldErrors, owner, id string) {
	fe.Owner(owner)
	fe.ID("id", id)
}

// getSummary reads one summary of owner; another owner's id is core.ErrNotFound.
func (s *Store) getSummary(ctx context.Context, owner, id string) (*Summary, *string, error) {
	var parent *string
	y, err := scanSummary(s.core.Pool.QueryRow(ctx, `SELECT `+summaryColumns+`, y.parent_id::text FROM `+s.sql.summaries+` AS y
		WHERE y.owner_id = $1 AND y.id = $2`, owner, id), &parent)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("summary %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, nil, core.DBErr("reading summary", err)
	}
	return &y, parent, nil
}

// DescribeSummary returns a summary with its place in the DAG: the children
// of a condensed summary (in order), the message range [from, to) of a
// leaf, and the parent ("" for a root).
func (s *Store) DescribeSummary(ctx context.Context, owner, id string) (*SummaryDescription, error) {
	fe := &core.FieldErrors{}
	summaryKey(fe, owner, id)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	y, parent, err := s.getSummary(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	d := &SummaryDescription{Summary: *y}
	if parent != nil {
		d.ParentID = *parent
	}
	if y.Depth == 0 {
		d.MessageRange = &[2]int64{y.EarliestSeq, y.LatestSeq + 1}
		return d, nil
	}
	// A compaction gives a summary at most condenseGroupSize children;
	// more (an import's) are not read, and the answer keeps what fits its
	// byte cap (issue 26, twentieth review: 1,000 sources of a 64 KiB
	// child answered 65.8 MB).
	children, err := s.querySummaries(ctx, s.core.Pool, `SELECT `+summaryColumns+` FROM `+s.sql.summarySources+` AS src
		JOIN `+s.sql.summaries+` AS y ON y.id = src.child_id WHERE src.summary_id = $1 ORDER BY src.ord LIMIT $2`,
		id, policy.MaxCondenseGroupSize+1)
	if err != nil {
		return nil, err
	}
	d.Children = []Summary{}
	kept := children[:min(len(children), policy.MaxCondenseGroupSize)]
	n := core.FitRanked(core.NewAnswerBytes(s.core.AnswerCap(0), d), kept)
	d.Children = kept[:n]
	if n < len(children) {
		d.ChildrenTruncated, d.ChildrenOmitted = true, len(children)-n
	}
	return d, nil
}

// ExpandSummary returns the original messages a summary covers, byte for
// byte and in order: the oldest ones that fit MaxTokens (0 =
// DefaultExpandTokens) and the byte cap; the Truncation names the newest
// ones left out. A condensed summary covers the contiguous messages of its
// leaves, so it expands to their union.
func (s *Store) ExpandSummary(ctx context.Context, req ExpandRequest) (*Expansion, error) {
	fe := &core.FieldErrors{}
	summaryKey(fe, req.Owner, req.ID)
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultExpandTokens
	}
	if maxTokens < 1 || maxTokens > MaxExpandTokens {
		fe.Add("maxTokens", "%d must be within 1..%d (0 = %d)", maxTokens, MaxExpandTokens, DefaultExpandTokens)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	y, _, err := s.getSummary(ctx, req.Owner, req.ID)
	if err != nil {
		return nil, err
	}
	e := &Expansion{Summary: *y, Messages: []Message{}}
	b := core.NewAnswerBytes(s.core.AnswerCap(req.MaxBytes), e)
	left := maxTokens
	end := y.LatestSeq + 1
	for from := y.EarliestSeq; from < end; {
		page, err := s.scanMessages(ctx, s.core.Pool, fitting(b, &left), `SELECT `+MessageColumns+` FROM `+s.sql.messages+` AS g
			WHERE g.owner_id = $1 AND g.session_id = $2 AND g.seq >= $3 AND g.seq < $4 ORDER BY g.seq LIMIT $5`,
			req.Owner, y.SessionID, from, end, expandPage)
		if err != nil {
			return nil, err
		}
		e.Messages = append(e.Messages, page...)
		for _, m := range page {
			e.Tokens += m.Tokens
		}
		if len(page) < expandPage {
			// Full (a message did not fit) or the end of the range.
			if len(page) > 0 {
				from = page[len(page)-1].Seq + 1
			}
			e.Omit(from, end)
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	return e, nil
}

// SearchHistory searches an owner's messages and summaries (optionally of
// one session) by full text and by vector: each kind is ranked by 0.6 ×
// cosine similarity + 0.4 × text rank (ts_rank, capped at 1 after × 10),
// exactly over the owner's rows, then merged. Snippets are at most 500
// characters around the first query word found. The results are given best
// first while their JSON fits the byte cap; the rest are counted in Omitted.
func (s *Store) SearchHistory(ctx context.Context, req HistorySearchRequest) (*HistorySearchResult, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	fe.Text("query", req.Query, s.core.Policy.Limits.MaxQueryBytes)
	if req.SessionID != "" && !core.ValidScopeID(req.SessionID) {
		fe.Add("sessionId", core.ScopeIDRule)
	}
	limit := fe.Limit(req.Limit, MaxHistoryResults, MaxHistoryResults)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	query := s.core.Redactor.Redacted(req.Query)
	vecs, err := s.core.Embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embedding the query: %w", err)
	}
	vec := pgv.NewVector(vecs[0])
	var hits []HistoryHit
	for _, kind := range []string{KindMessage, KindSummary} {
		found, err := s.searchKind(ctx, kind, req.Owner, req.SessionID, query, vec, limit)
		if err != nil {
			return nil, err
		}
		hits = append(hits, found...)
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	res := &HistorySearchResult{Results: []HistoryHit{}}
	b := core.NewAnswerBytes(s.core.AnswerCap(req.MaxBytes), res)
	for i := range hits {
		hits[i].Snippet = snippet(hits[i].Snippet, query)
		if !b.Take(hits[i]) {
			res.Truncated, res.Omitted = true, len(hits)-i
			break
		}
		res.Results = append(res.Results, hits[i])
	}
	return res, nil
}

// searchKind ranks one table's rows of the owner.
func (s *Store) searchKind(ctx context.Context, kind, owner, session, query string, vec pgv.Vector, limit int) ([]HistoryHit, error) {
	a := &core.Args{}
	table, cols := s.sql.messages, `t.session_id, t.seq, '' AS summary_id, t.source`
	if kind == KindSummary {
		table, cols = s.sql.summaries, `t.session_id, 0::bigint, t.id::text, ''`
	}
	where := `t.owner_id = ` + a.Add(owner)
	if session != "" {
		where += ` AND t.session_id = ` + a.Add(session)
	}
	cfg, err := s.core.TextConfig(ctx)
	if err != nil {
		return nil, err
	}
	// History search reads the owner's rows (or the session's) by owner;
	// under another configuration than English it reads their stored
	// tsv_local (migration 19), as English reads tsv.
	tv := core.RowTextVector(cfg, "t.", "content")
	tq := `websearch_to_tsquery('` + cfg + `', ` + a.Add(query) + `)`
	score := `0.6 * coalesce(1 - (t.embedding <=> ` + a.Add(vec) + `), 0) + 0.4 * least(1, 10 * ts_rank(` + tv + `, ` + tq + `))`
	rows, err := s.core.Pool.Query(ctx, `SELECT `+cols+`, t.content, t.created_at, `+score+` AS score FROM `+table+` AS t
		WHERE `+where+` AND (t.embedding IS NOT NULL OR `+tv+` @@ `+tq+`)
		ORDER BY score DESC, t.created_at DESC LIMIT `+a.Add(limit), a.List...)
	if err != nil {
		return nil, core.DBErr("searching history", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (HistoryHit, error) {
		h := HistoryHit{Kind: kind}
		var src string
		err := r.Scan(&h.SessionID, &h.Seq, &h.SummaryID, &src, &h.Snippet, &h.CreatedAt, &h.Score)
		h.Source = core.Source(src)
		h.CreatedAt = h.CreatedAt.UTC()
		return h, err
	})
}

// snippet cuts content to at most MaxSnippetChars characters, around the
// first query word of three letters or more it contains (case-insensitive).
func snippet(content, query string) string {
	if utf8.RuneCountInString(content) <= MaxSnippetChars {
		return content
	}
	lower := strings.ToLower(content)
	at := -1
	for _, w := range strings.Fields(strings.ToLower(query)) {
		if utf8.RuneCountInString(w) < 3 {
			continue
		}
		if i := strings.Index(lower, w); i >= 0 && (at < 0 || i < at) && len(lower) == len(content) {
			at = i
		}
	}
	runes := []rune(content)
	start := 0
	if at > 0 {
		start = max(0, utf8.RuneCountInString(content[:at])-MaxSnippetChars/4)
	}
	start = min(start, len(runes)-(MaxSnippetChars-6))
	out := string(runes[start : start+MaxSnippetChars-6])
	if start > 0 {
		out = "..." + out
	}
	if start+MaxSnippetChars-6 < len(runes) {
		out += "..."
	}
	return out
}
