package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/engram-dev/engram/internal/memory"
)

// ConversationReport is what the conversation step did, for the summary
// and the e2e assertions.
type ConversationReport struct {
	Appended   int64 // messages in the session after the appends
	Compaction memory.CompactSessionResult
	// Window is the summary window of 1,000 tokens after compaction.
	WindowItems, WindowSummaries, WindowTokens int
	// Expanded is one root summary expanded back: its message count and
	// whether every message equals the stored one, byte for byte.
	ExpandedRoot     string
	ExpandedMessages int
	ExpandedExact    bool
}

const (
	demoSession      = "demo-support-chat"
	demoConversation = 200 // messages: 100 turns of a question and an answer
)

// conversation appends a 200-message conversation of alice through the API,
// compacts it (no LLM in the demo: the extractive summarizer), asks for a
// summary window, and expands one root summary back into its messages.
func (s *Scenario) conversation(ctx context.Context, r *Report) error {
	api, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	c := &r.Conversation
	base := "/v1/owners/alice/sessions"
	// A second run tells the same story (erasing alice removed it already,
	// unless the first run stopped in between).
	var se *StatusError
	if err := api.Do(ctx, http.MethodDelete, base+"/"+demoSession, nil, nil); err != nil && !(errors.As(err, &se) && se.Status == http.StatusNotFound) {
		return err
	}
	if err := api.Do(ctx, http.MethodPost, base, map[string]any{"id": demoSession, "agent": "support-bot", "title": "Travel planning"}, nil); err != nil {
		return err
	}
	var last memory.AppendResult
	for i := range demoConversation / 2 {
		body := map[string]any{"messages": []map[string]any{
			{"role": "user", "content": fmt.Sprintf("Day %d of the trip: what should I see in %s, and how do I get there from the hotel?", i+1, demoCities[i%len(demoCities)])},
			{"role": "assistant", "content": fmt.Sprintf("For day %d in %s: start early at the old town, take the regional train (about 40 minutes), and book the museum online.", i+1, demoCities[i%len(demoCities)])},
		}}
		if err := api.Do(ctx, http.MethodPost, base+"/"+demoSession+"/messages", body, &last); err != nil {
			return err
		}
	}
	c.Appended = last.Session.MessageCount
	s.printf("   POST %s/%s/messages x %d turns -> %d messages, %d tokens (compactionDue %v)\n",
		base, demoSession, demoConversation/2, last.Session.MessageCount, last.Session.TokenCount, last.CompactionDue)

	if err := api.Do(ctx, http.MethodPost, base+"/"+demoSession+"/compact", map[string]any{"mode": "full", "force": true}, &c.Compaction); err != nil {
		return err
	}
	s.printf("   POST .../compact {\"mode\":\"full\",\"force\":true} -> %d leaf and %d condensed summaries over %d messages (%s), %d roots\n",
		c.Compaction.LeavesCreated, c.Compaction.CondensedCreated, c.Compaction.MessagesSummarized, c.Compaction.Method, len(c.Compaction.Roots))

	var win memory.Window
	if err := api.Do(ctx, http.MethodPost, base+"/"+demoSession+"/window", map[string]any{"strategy": "summary", "budget": 1000}, &win); err != nil {
		return err
	}
	c.WindowItems, c.WindowTokens = len(win.Items), win.Tokens
	for _, it := range win.Items {
		if it.Kind == memory.KindSummary {
			c.WindowSummaries++
		}
	}
	s.printf("   POST .../window {\"strategy\":\"summary\",\"budget\":1000} -> %d summaries + %d messages, %d tokens, %d messages dropped\n",
		c.WindowSummaries, c.WindowItems-c.WindowSummaries, win.Tokens, win.Dropped)
	if len(c.Compaction.Roots) == 0 {
		return errors.New("the compaction made no summary")
	}
	return s.expandRoot(ctx, api, c)
}

// expandRoot expands the first root summary and compares its messages
// with the stored ones.
func (s *Scenario) expandRoot(ctx context.Context, api *API, c *ConversationReport) error {
	root := c.Compaction.Roots[0]
	var exp memory.Expansion
	if err := api.Do(ctx, http.MethodGet, "/v1/owners/alice/summaries/"+root.ID+"/expand", nil, &exp); err != nil {
		return err
	}
	var stored struct {
		Items []memory.ConversationMessage `json:"items"`
	}
	path := fmt.Sprintf("/v1/owners/alice/sessions/%s/messages?from=%d&to=%d", demoSession, root.EarliestSeq, root.LatestSeq+1)
	if err := api.Do(ctx, http.MethodGet, path, nil, &stored); err != nil {
		return err
	}
	c.ExpandedRoot, c.ExpandedMessages = root.ID, len(exp.Messages)
	c.ExpandedExact = !exp.Truncated && len(exp.Messages) == len(stored.Items)
	for i := 0; c.ExpandedExact && i < len(exp.Messages); i++ {
		c.ExpandedExact = exp.Messages[i].Seq == stored.Items[i].Seq && exp.Messages[i].Content == stored.Items[i].Content
	}
	s.printf("   GET /v1/owners/alice/summaries/%s/expand -> depth %d summary of seq %d..%d expands to %d messages, identical to the stored ones: %v\n",
		root.ID[:8], root.Depth, root.EarliestSeq, root.LatestSeq, len(exp.Messages), c.ExpandedExact)
	return nil
}

var demoCities = []string{"Lisbon", "Porto", "Coimbra", "Évora", "Braga", "Faro", "Sintra", "Aveiro"}
