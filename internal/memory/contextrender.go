package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/textguard"
)

const (
	defaultContextTokens = 1000
	maxContextTokens     = 32000
)

// Context renders owner's memories for a prompt within a token budget.
// Sections are categories in render order (Policy.RenderOrder: pinned
// categories first, then by priority, higher first, then by name), and each
// takes what it needs from the budget that is left, so the budget flows
// down. Within a pinned category memories are ordered by value (importance
// x decay, then newest first) whatever the query, so the pinned part of a
// prompt stays the same from turn to turn; within the other categories by
// relevance to the query when one is given (cosine similarity + 0.25 x
// value), else by value too. A memory that does not fit is skipped and
// counted in Omitted, as are the memories that were not candidates (see
// contextCandidates). Content is sanitized and its structure neutralized
// (promptText: one line, no control or invisible characters, no heading,
// speaker label, code fence or tag of its own); memories the injection
// guard flagged are never rendered.
func (s *Store) Context(ctx context.Context, req ContextRequest) (*ContextResult, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	fe.Scope(req.Agent, req.Session)
	if req.Query != "" {
		fe.Text("query", req.Query, s.core.Policy.Limits.MaxQueryBytes)
	}
	budget := req.MaxTokens
	if budget == 0 {
		budget = defaultContextTokens
	}
	if budget < 1 || budget > maxContextTokens {
		fe.Add("maxTokens", "%d must be within 1..%d", req.MaxTokens, maxContextTokens)
	}
	if req.MaxEpisodes < 0 || req.MaxEpisodes > maxContextEpisodes {
		fe.Add("maxEpisodes", "%d must be within 0..%d", req.MaxEpisodes, maxContextEpisodes)
	}
	filterSQL(fe, &core.Args{}, req.Filter)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	cands, total, err := (*reader)(s).contextCandidates(ctx, req, budget)
	if err != nil {
		return nil, err
	}
	res, err := (*longTerm)(s).contextSections(ctx, req, cands, budget)
	if err != nil {
		return nil, err
	}
	res.Omitted += total - len(cands)
	s.access.record(res.IDs...)
	return res, nil
}

// candidate is a memory considered for context with its ordering value.
type candidate struct {
	id, category, content string
	value                 float64
}

// minContextLine is the rendered size, in bytes, a memory is assumed to
// take at least when the candidates of a category are chosen: "- ", 29
// bytes of content and a newline. Shorter memories beyond the candidates
// of their category are left out even when they would still fit.
const minContextLine = 32

// contextLimits are how many memories of each category are candidates for
// a budget of budget tokens: as many as fill the budget at minContextLine
// bytes each (at least 16) for a category; for a pinned category as many as
// could fit at all (every line costs at least one token), so pinned
// memories are always candidates.
func contextLimits(budget int) (perCategory, perPinned int) {
	return max(16, budget*core.ASCIIBytesPerToken/minContextLine), budget
}

// contextCandidates selects the owner's renderable memories that can make
// it into the budget, through the same exact per-owner scan as search but
// returning only the best of each category (contextLimits), best first; and
// how many renderable memories the owner has in all.
func (s *reader) contextCandidates(ctx context.Context, req ContextRequest, budget int) ([]candidate, int, error) {
	var vec []float32
	if req.Query != "" {
		vecs, err := s.core.Embedder.Embed(ctx, []string{s.core.Redactor.Redacted(req.Query)})
		if err != nil {
			return nil, 0, fmt.Errorf("embedding the query: %w", err)
		}
		vec = vecs[0]
	}
	sql, args := (*Store)(s).ContextQuery(req, vec, budget)
	rows, err := s.core.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, core.DBErr("loading context", err)
	}
	defer rows.Close()
	var out []candidate
	total := 0
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.category, &c.content, &c.value, &total); err != nil {
			return nil, 0, core.DBErr("loading context", err)
		}
		out = append(out, c)
	}
	return out, total, core.DBErr("loading context", rows.Err())
}

// pinnedCategories are the names of the policy's pinned categories.
func (s *reader) pinnedCategories() []string {
	out := []string{}
	for _, c := range s.core.Policy.Categories {
		if c.Pinned {
			out = append(out, c.Name)
		}
	}
	return out
}

// render lays candidates out by category within budget tokens (CountTokens
// of each header and line; the count of a whole text never exceeds the sum
// of its parts', so Tokens never exceeds the budget) and within bytes (the
// JSON of each line and id; nil = no byte cap): a memory that fits the
// tokens but not the bytes is omitted and the result Truncated. It is
// pure, so the budget rules are tested without a database.
func render(order []Category, cands []candidate, budget int, room *core.AnswerBytes) *ContextResult {
	res := &ContextResult{IDs: []string{}}
	var b strings.Builder
	left := budget
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
			if left <= 0 {
				// Every line costs at least one token: nothing fits any
				// more, so skip the work of sanitizing and counting it.
				res.Omitted++
				continue
			}
			line := "- " + textguard.PromptText(c.content) + "\n"
			cost := CountTokens(line)
			if !started {
				cost += CountTokens(header)
			}
			if cost > left {
				res.Omitted++
				continue
			}
			text := line
			if !started {
				text = header + line
			}
			if !room.TakeText(text, c.id) {
				res.Omitted++
				res.Truncated = true
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
	res.Tokens = CountTokens(res.Text)
	return res
}
