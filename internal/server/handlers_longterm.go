package server

import (
	"net/http"

	"github.com/engram-dev/engram/internal/memory"
)

// Long-term memory from conversations (docs/long-term.md): facts extracted
// from a session's messages, episodes of finished sessions, the versioned
// profile and constraints documents of (owner, agent) with their changelog
// and the per-session snapshots of them. Every route is owner-scoped like
// the memories; a session of another owner answers 404 like a missing one.

// extractSession: POST /v1/owners/{owner}/sessions/{id}/extract {source?}.
// Extracts facts from the messages after the session's watermark with at
// most two LLM calls; no new messages is a 200 with llmCalls 0. Needs an
// LLM when there are new messages (409 no-llm, nothing written).
func (a rest) extractSession(c *call, b *sessionWriteBody) (reply, error) {
	src, err := writeSourceErr(c.credential(), b.Source)
	if err != nil {
		return reply{}, err
	}
	return replyOf(a.ops.extractSession(c.ctx(), memory.SessionExtractRequest{Owner: c.owner(), SessionID: c.id(), Source: src}))
}

// endSession: POST /v1/owners/{owner}/sessions/{id}/end {source?}. Archives
// the session, writes its episode (3 or more user turns) and extracts when
// the policy's conversation.extractOnEnd is on and an LLM exists. Ending an
// ended session again only retries what is missing.
func (a rest) endSession(c *call, b *sessionWriteBody) (reply, error) {
	src, err := writeSourceErr(c.credential(), b.Source)
	if err != nil {
		return reply{}, err
	}
	res, err := a.ops.store.EndSession(c.ctx(), memory.EndSessionRequest{Owner: c.owner(), SessionID: c.id(), Source: src})
	if err != nil {
		return reply{}, inResource(err, resSession)
	}
	if res.Extraction != nil {
		a.ops.extracted(c.ctx(), res.Extraction)
	}
	return ok(res), nil
}

// getSnapshot: GET /v1/owners/{owner}/sessions/{id}/snapshot: the profile
// and constraints versions the session's context renders.
func (a rest) getSnapshot(c *call, _ *noBody) (reply, error) {
	snap, err := a.ops.store.GetSnapshot(c.ctx(), c.owner(), c.id())
	return replyOf(snap, inResource(err, resSession))
}

// advanceSnapshot: POST /v1/owners/{owner}/sessions/{id}/snapshot/advance
// (no body, or {}): the session's context renders the current versions
// from now on.
func (a rest) advanceSnapshot(c *call, _ *emptyBody) (reply, error) {
	snap, err := a.ops.store.AdvanceSnapshot(c.ctx(), c.owner(), c.id())
	return replyOf(snap, inResource(err, resSession))
}

// searchEpisodes: GET /v1/owners/{owner}/episodes?query=&agent=&limit=:
// episodes ranked by hybrid score with recency, or newest first without a query.
func (a rest) searchEpisodes(c *call, _ *noBody) (reply, error) {
	req := memory.EpisodeSearchRequest{
		Owner: c.owner(), Query: c.q.str("query"), Agent: c.q.str("agent"), Limit: c.q.integer("limit"),
	}
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	return replyOf(a.ops.searchEpisodes(c.ctx(), req))
}

// getDocument: GET /v1/owners/{owner}/profile|constraints?agent=&version=.
func (a rest) getDocument(kind memory.DocumentKind) operation[noBody] {
	return func(c *call, _ *noBody) (reply, error) {
		req := memory.GetDocumentRequest{
			Owner: c.owner(), Agent: c.q.str("agent"), Kind: kind, Version: c.q.integer64("version"),
		}
		if err := c.q.err(); err != nil {
			return reply{}, err
		}
		return replyOf(a.ops.getDocument(c.ctx(), req))
	}
}

// putDocument: PUT /v1/owners/{owner}/profile|constraints?agent= {content,
// source?, ifVersion?}: a new version, recorded in the changelog.
// Constraints are the user's rules for the agent: only source user (an app
// or admin token asserting it) may write them, anything else is 403.
func (a rest) putDocument(kind memory.DocumentKind) operation[putDocumentBody] {
	return func(c *call, b *putDocumentBody) (reply, error) {
		agent := c.q.str("agent")
		if err := c.q.err(); err != nil {
			return reply{}, err
		}
		src, err := writeSourceErr(c.credential(), b.Source)
		if err != nil {
			return reply{}, err
		}
		return replyOf(a.ops.putDocument(c.ctx(), memory.PutDocumentRequest{
			Owner: c.owner(), Agent: agent, Kind: kind, Content: b.Content, Source: src, IfVersion: b.IfVersion,
		}))
	}
}

// changelog: GET /v1/owners/{owner}/changelog?scope=&agent=&limit=&cursor=:
// the writes of the owner's documents, newest first, one page within the
// byte cap. Without agent, every agent's; agent= (empty) is the documents
// shared by all agents.
func (a rest) changelog(c *call, _ *noBody) (reply, error) {
	q := c.q
	req := memory.ChangelogRequest{
		Owner: c.owner(), Scope: memory.DocumentKind(q.str("scope")), Limit: q.integer("limit"), Cursor: q.str("cursor"),
	}
	if q.values.Has("agent") {
		agent := q.str("agent")
		req.Agent = &agent
	}
	if err := q.err(); err != nil {
		return reply{}, err
	}
	page, err := a.ops.store.Changelog(c.ctx(), req)
	if err != nil {
		return reply{}, err
	}
	page.Items = nonNil(page.Items)
	return ok(page), nil
}

// listGlobal: GET /v1/global/memories?category=&limit=&cursor=: the
// tenant-wide memories (categories with global: true), most recently
// written first, one page within the byte cap.
func (a rest) listGlobal(c *call, _ *noBody) (reply, error) {
	req := memory.ListRequest{Category: c.q.str("category"), Limit: c.q.integer("limit"), Cursor: c.q.str("cursor")}
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	page, err := a.ops.store.ListGlobal(c.ctx(), req)
	if err != nil {
		return reply{}, err
	}
	page.Items = nonNil(page.Items)
	return ok(page), nil
}

// deleteGlobal: DELETE /v1/global/memories/{id}?source=: a soft delete of
// one tenant-wide memory. Only user or system may delete one; the route is
// for app and admin tokens, so an absent source means system here.
func (a rest) deleteGlobal(c *call, _ *noBody) (reply, error) {
	asked := memory.Source(c.q.str("source"))
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	if asked == "" {
		asked = memory.SourceSystem
	}
	source, err := writeSourceErr(c.credential(), asked)
	if err != nil {
		return reply{}, err
	}
	if err := a.ops.store.DeleteGlobal(c.ctx(), c.id(), source); err != nil {
		return reply{}, inResource(err, resGlobal)
	}
	return noContent(), nil
}

// unbound refuses credentials bound to one owner: tenant-wide memories
// belong to no owner, so a token meant for one end user may not manage them.
func unbound(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if credential(r).Owner != "" {
			writeProblem(w, r, newProblem(probOwnerNotAllowed,
				"this token is bound to one owner; tenant-wide (global) memories need a token that is not bound"))
			return
		}
		h(w, r)
	}
}
