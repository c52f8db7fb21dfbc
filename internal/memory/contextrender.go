package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	pgv "github.com/pgvector/pgvector-go"
)

const (
	defaultContextTokens = 1000
	maxContextTokens     = 32000
	// bytesPerToken is the estimate used for budgets: about 4 bytes of
	// English text per token for common tokenizers.
	bytesPerToken = 4
)

func estimateTokens(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

// Context renders owner's memories for a prompt within a token budget.
// Categories come in render order (pinned first, then by priority) and each
// takes what it needs from the budget that is left, so the budget flows
// down; within a category, memories are ordered by relevance to the query
// when one is given, else by value (importance x decay, then recency). A
// memory that does not fit is skipped and counted in Omitted. Content is
// sanitized (one line, no control or invisible characters); memories the
// injection guard flagged are never rendered.
func (s *Store) Context(ctx context.Context, req ContextRequest) (*ContextResult, error) {
	fe := &fieldErrors{}
	fe.owner(req.Owner)
	fe.scope(req.Agent, req.Session)
	if req.Query != "" {
		fe.text("query", req.Query, s.policy.Limits.MaxQueryBytes)
	}
	budget := req.MaxTokens
	if budget == 0 {
		budget = defaultContextTokens
	}
	if budget < 1 || budget > maxContextTokens {
		fe.add("maxTokens", "%d must be within 1..%d", req.MaxTokens, maxContextTokens)
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	cands, err := s.contextCandidates(ctx, req)
	if err != nil {
		return nil, err
	}
	res := render(s.policy.RenderOrder(), cands, budget)
	s.access.record(res.IDs...)
	return res, nil
}

// candidate is a memory considered for context with its ordering value.
type candidate struct {
	id, category, content string
	value                 float64
}

// contextCandidates loads the owner's renderable memories, best first.
func (s *Store) contextCandidates(ctx context.Context, req ContextRequest) ([]candidate, error) {
	a := &args{}
	where := `m.owner_id = ` + a.add(req.Owner) + ` AND m.active AND (m.expires_at IS NULL OR m.expires_at > now())` + notFlagged
	where += scopeFilter(a, req.Agent, req.Session)
	value := `m.importance / 10.0 * ` + decayExpr(a.add(s.decayNames), a.add(s.decaySeconds))
	if req.Query != "" {
		vecs, err := s.embedder.Embed(ctx, []string{s.redactor.redacted(req.Query)})
		if err != nil {
			return nil, fmt.Errorf("embedding the query: %w", err)
		}
		value = `(1 - (m.embedding <=> ` + a.add(pgv.NewVector(vecs[0])) + `)) + 0.25 * ` + value
	}
	rows, err := s.pool.Query(ctx, `SELECT m.id::text, m.category, m.content, `+value+` AS v
		FROM `+s.sql.memories+` AS m WHERE `+where+` ORDER BY v DESC, m.updated_at DESC`, a.list...)
	if err != nil {
		return nil, s.dbErr("loading context", err)
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.category, &c.content, &c.value); err != nil {
			return nil, s.dbErr("loading context", err)
		}
		out = append(out, c)
	}
	return out, s.dbErr("loading context", rows.Err())
}

// render lays candidates out by category within budget tokens (counted as
// bytesPerToken bytes each, so Tokens never exceeds the budget). It is pure,
// so the budget rules are tested without a database.
func render(order []Category, cands []candidate, budget int) *ContextResult {
	res := &ContextResult{IDs: []string{}}
	var b strings.Builder
	left := budget * bytesPerToken
	for _, cat := range order {
		header := "## " + cat.Name + "\n"
		if b.Len() > 0 {
			header = "\n" + header
		}
		started := false
		for _, c := range cands {
			if c.category != cat.Name {
				continue
			}
			line := "- " + sanitizeForPrompt(c.content) + "\n"
			cost := len(line)
			if !started {
				cost += len(header)
			}
			if cost > left {
				res.Omitted++
				continue
			}
			left -= cost
			if !started {
				b.WriteString(header)
				started = true
			}
			b.WriteString(line)
			res.IDs = append(res.IDs, c.id)
		}
	}
	// Memories of categories the policy no longer has are not rendered.
	for _, c := range cands {
		if !slices.ContainsFunc(order, func(cat Category) bool { return cat.Name == c.category }) {
			res.Omitted++
		}
	}
	res.Text = b.String()
	res.Tokens = estimateTokens(res.Text)
	return res
}
