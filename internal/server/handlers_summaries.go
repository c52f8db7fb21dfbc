package server

import (
	"github.com/engram-dev/engram/internal/memory"
)

// The explorer of the summary DAG and the history search
// (docs/conversation.md). A summary id of another owner answers 404
// exactly like a missing one.

// describeSummary: GET /v1/owners/{owner}/summaries/{id}: the summary, its
// children and, for a leaf, the range of messages it covers.
func (a rest) describeSummary(c *call, _ *noBody) (reply, error) {
	d, err := a.ops.store.DescribeSummary(c.ctx(), c.owner(), c.id())
	if err != nil {
		return reply{}, inResource(err, resSummary)
	}
	d.Children = nonNil(d.Children)
	return ok(d), nil
}

// expandSummary: GET /v1/owners/{owner}/summaries/{id}/expand?maxTokens=:
// the original messages the summary covers, byte for byte, oldest first,
// up to maxTokens (0 = the engine's default of 20,000) and the byte cap;
// truncated and the omitted range say when more exist.
func (a rest) expandSummary(c *call, _ *noBody) (reply, error) {
	maxTokens := c.q.integer("maxTokens")
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	return replyOf(a.ops.expand(c.ctx(), memory.ExpandRequest{Owner: c.owner(), ID: c.id(), MaxTokens: maxTokens}))
}

// searchHistory: POST /v1/owners/{owner}/history/search: messages and
// summaries of the owner (or of one session), best first.
func (a rest) searchHistory(c *call, b *historySearchBody) (reply, error) {
	return replyOf(a.ops.searchHistory(c.ctx(), memory.HistorySearchRequest{
		Owner: c.owner(), Query: b.Query, SessionID: b.SessionID, Limit: b.Limit,
	}))
}
