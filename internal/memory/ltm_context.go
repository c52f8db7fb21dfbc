package memory

import (
	"context"
	"strings"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/textguard"
)

const (
	defaultContextEpisodes = 3
	maxContextEpisodes     = 10
)

// contextSections renders a context in its order — constraints, profile,
// memories (render), episodes — within budget tokens and the byte cap
// (counted on the text's and the ids' JSON as each part is added). A
// document is rendered whole or not at all; each section after the first
// costs one more token (and byte) for the blank line between sections.
func (s *longTerm) contextSections(ctx context.Context, req ContextRequest, cands []candidate, budget int) (*ContextResult, error) {
	constraints, profile, err := s.lt.ContextDocuments(ctx, req.Owner, req.Agent, req.Session)
	if err != nil {
		return nil, err
	}
	room := core.NewAnswerBytes((*reader)(s).answerCap(req.MaxBytes), ContextResult{IDs: []string{}})
	truncated := false
	var parts []string
	left := budget
	sep := func() int {
		if len(parts) > 0 {
			return 1
		}
		return 0
	}
	addDoc := func(title string, d *Document) int64 {
		text, cost := renderDocument(title, d.Content, left-sep())
		if text == "" {
			return 0
		}
		if !room.TakeText(strings.Repeat("\n", sep()) + text) {
			truncated = true
			return 0
		}
		left -= cost + sep()
		parts = append(parts, text)
		return d.Version
	}
	cv := addDoc("constraints", constraints)
	pv := addDoc("profile", profile)
	memBudget := max(0, left-sep())
	room.TakeText(strings.Repeat("\n", sep())) // the blank line before the memories, if they come
	res := render(s.core.Policy.RenderOrder(), cands, memBudget, room)
	if res.Text != "" {
		left -= CountTokens(res.Text) + sep()
		parts = append(parts, res.Text)
	}
	res.Truncated = res.Truncated || truncated
	res.ConstraintsVersion, res.ProfileVersion = cv, pv
	if req.IncludeEpisodes {
		room.TakeText(strings.Repeat("\n", sep()))
		text, ids, cut, err := s.contextEpisodes(ctx, req, left-sep(), room)
		if err != nil {
			return nil, err
		}
		if text != "" {
			parts = append(parts, text)
			res.EpisodeIDs = ids
		}
		res.Truncated = res.Truncated || cut
	}
	res.Text = strings.Join(parts, "\n")
	res.Tokens = CountTokens(res.Text)
	return res, nil
}

// contextEpisodes renders the owner's most relevant episodes (to the query,
// else the newest) within left tokens and the byte cap, as many whole
// lines as fit; cut says the byte cap left a line out that the tokens had
// room for.
func (s *longTerm) contextEpisodes(ctx context.Context, req ContextRequest, left int, room *core.AnswerBytes) (string, []string, bool, error) {
	n := req.MaxEpisodes
	if n == 0 {
		n = defaultContextEpisodes
	}
	hits, err := s.lt.RelevantEpisodes(ctx, req.Owner, req.Agent, req.Query, n)
	if err != nil || len(hits) == 0 {
		return "", nil, false, err
	}
	header := "## episodes\n"
	if !room.TakeText(header) {
		return "", nil, true, nil
	}
	var b strings.Builder
	var ids []string
	cut := false
	used := CountTokens(header)
	for _, h := range hits {
		line := "- " + h.Episode.EndedAt.Format("2006-01-02") + ": " + textguard.PromptText(h.Episode.Summary) + "\n"
		if c := CountTokens(line); used+c <= left {
			if !room.TakeText(line, h.Episode.ID) {
				cut = true
				continue
			}
			used += c
			b.WriteString(line)
			ids = append(ids, h.Episode.ID)
		}
	}
	if len(ids) == 0 {
		return "", nil, cut, nil
	}
	return header + b.String(), ids, cut, nil
}

// renderDocument renders a document as a section within left tokens; it
// returns the text and its cost, or "" when it is empty or does not fit
// (a document is rendered whole or not at all: half a rule set is worse).
// Each line goes through promptText: a profile an agent wrote cannot open
// a "## constraints" section of its own.
func renderDocument(title, content string, left int) (string, int) {
	if strings.TrimSpace(content) == "" {
		return "", 0
	}
	var b strings.Builder
	b.WriteString("## " + title + "\n")
	for _, line := range strings.Split(content, "\n") {
		if l := textguard.PromptText(line); l != "" {
			b.WriteString(l + "\n")
		}
	}
	text := b.String()
	cost := core.CountTokens(text)
	if cost > left {
		return "", 0
	}
	return text, cost
}
