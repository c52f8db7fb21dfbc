package server

import (
	"github.com/engram-dev/engram/internal/memory"
)

// extract: POST /v1/owners/{owner}/extract. Needs an LLM (409 no-llm without).
func (a rest) extract(c *call, b *extractBody) (reply, error) {
	src, err := writeSourceErr(c.credential(), b.Source)
	if err != nil {
		return reply{}, err
	}
	res, err := a.ops.extract(c.ctx(), memory.ExtractRequest{
		Owner: c.owner(), Agent: b.Agent, Session: b.Session, Source: src, Messages: b.Messages,
	})
	if err != nil {
		return reply{}, err
	}
	return ok(batchResponse{Results: res}), nil
}

// search: POST /v1/owners/{owner}/search.
func (a rest) search(c *call, b *searchBody) (reply, error) {
	return replyOf(a.ops.search(c.ctx(), memory.SearchRequest{
		Owner: c.owner(), Agent: b.Agent, Session: b.Session, Query: b.Query, Vector: b.Vector,
		Mode: b.Mode, TopK: b.TopK, Categories: b.Categories, MinScore: b.MinScore, Filter: b.Filter, Rerank: b.Rerank,
	}))
}

// context: POST /v1/owners/{owner}/context.
func (a rest) context(c *call, b *contextBody) (reply, error) {
	return replyOf(a.ops.context(c.ctx(), memory.ContextRequest{
		Owner: c.owner(), Agent: b.Agent, Session: b.Session, Query: b.Query, MaxTokens: b.MaxTokens,
		IncludeEpisodes: b.IncludeEpisodes, MaxEpisodes: b.MaxEpisodes, Filter: b.Filter,
	}))
}

// eraseOwner: DELETE /v1/owners/{owner}, admin tokens only. Hard-deletes
// every memory and all history of the owner (GDPR erasure) and says how
// many rows went.
func (a rest) eraseOwner(c *call, _ *noBody) (reply, error) {
	return replyOf(a.ops.store.EraseOwner(c.ctx(), c.owner()))
}

// listOwners: GET /v1/owners, app and admin tokens (agent tokens are bound
// to one owner and have nothing to discover). A token bound to an owner
// sees that owner only.
func (a rest) listOwners(c *call, _ *noBody) (reply, error) {
	req := memory.OwnersRequest{Limit: c.q.integer("limit"), Cursor: c.q.str("cursor"), Only: c.credential().Owner}
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	page, err := a.ops.store.Owners(c.ctx(), req)
	if err != nil {
		return reply{}, err
	}
	page.Items = nonNil(page.Items)
	return ok(page), nil
}

// stats: GET /v1/stats, admin tokens only. Tenant-wide counts of memories
// and owners for operators (`kubectl engram status`); an admin may already
// read every owner, so the counts reveal nothing new to it.
func (a rest) stats(c *call, _ *noBody) (reply, error) {
	return replyOf(a.ops.store.Stats(c.ctx()))
}
