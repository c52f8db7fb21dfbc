package server

import (
	"net/url"

	"github.com/engram-dev/engram/internal/memory"
)

// Conversation sessions: the message log of one conversation of an owner
// (docs/conversation.md). Every route is owner-scoped like the memories;
// a session id of another owner answers 404 exactly like a missing one.

// createSession: POST /v1/owners/{owner}/sessions. 201 with Location.
func (a rest) createSession(c *call, b *createSessionBody) (reply, error) {
	sess, err := a.ops.createSession(c.ctx(), memory.CreateSessionRequest{
		Owner: c.owner(), ID: b.ID, Agent: b.Agent, Title: b.Title,
	})
	if err != nil {
		return reply{}, err
	}
	return created(sess, sessionPath(sess.Owner, sess.ID)), nil
}

func sessionPath(owner, id string) string {
	return "/v1/owners/" + url.PathEscape(owner) + "/sessions/" + url.PathEscape(id)
}

// listSessions: GET /v1/owners/{owner}/sessions, most recently active first.
func (a rest) listSessions(c *call, _ *noBody) (reply, error) {
	q := c.q
	req := memory.ListSessionsRequest{
		Owner:    c.owner(),
		Agent:    q.str("agent"),
		Archived: q.optBoolean("archived"),
		Limit:    q.integer("limit"),
		Cursor:   q.str("cursor"),
	}
	if err := q.err(); err != nil {
		return reply{}, err
	}
	page, err := a.ops.store.ListSessions(c.ctx(), req)
	if err != nil {
		return reply{}, inResource(err, resSession)
	}
	page.Sessions = nonNil(page.Sessions)
	return ok(page), nil
}

// getSession: GET /v1/owners/{owner}/sessions/{id}.
func (a rest) getSession(c *call, _ *noBody) (reply, error) {
	sess, err := a.ops.store.GetSession(c.ctx(), c.owner(), c.id())
	return replyOf(sess, inResource(err, resSession))
}

// updateSession: PATCH /v1/owners/{owner}/sessions/{id} {title, archived}.
func (a rest) updateSession(c *call, b *updateSessionBody) (reply, error) {
	sess, err := a.ops.store.UpdateSession(c.ctx(), memory.UpdateSessionRequest{
		Owner: c.owner(), ID: c.id(), Title: b.Title, Archived: b.Archived,
	})
	return replyOf(sess, inResource(err, resSession))
}

// deleteSession: DELETE /v1/owners/{owner}/sessions/{id}, app and admin
// tokens. A hard delete of the session with its messages and summaries:
// unlike a memory's soft delete nothing can be restored, so agents may
// archive a session (PATCH) but not delete it (docs/conversation.md).
func (a rest) deleteSession(c *call, _ *noBody) (reply, error) {
	if err := a.ops.store.DeleteSession(c.ctx(), c.owner(), c.id()); err != nil {
		return reply{}, inResource(err, resSession)
	}
	return noContent(), nil
}

// appendMessages: POST /v1/owners/{owner}/sessions/{id}/messages. One turn
// (1..N messages) is stored atomically with gap-free seq numbers; the
// redaction and injection guard of memory writes run on every message, and
// a refused message is a 422 that stores nothing of the turn.
func (a rest) appendMessages(c *call, b *appendBody) (reply, error) {
	src, err := writeSourceErr(c.credential(), b.Source)
	if err != nil {
		return reply{}, err
	}
	res, err := a.ops.appendTurn(c.ctx(), b.request(c.owner(), c.id(), src))
	if err != nil {
		return reply{}, err
	}
	return created(res, ""), nil
}

// readMessages: GET /v1/owners/{owner}/sessions/{id}/messages?from=&to=
// (seq range [from,to), either end open) or ?last=N.
func (a rest) readMessages(c *call, _ *noBody) (reply, error) {
	q := c.q
	req := memory.MessagesRequest{
		Owner: c.owner(), SessionID: c.id(),
		From: q.integer64("from"), To: q.integer64("to"), Last: q.integer("last"),
	}
	if q.values.Has("last") && (q.values.Has("from") || q.values.Has("to")) {
		q.errs = append(q.errs, fieldErr("last", "send either last or a from/to range, not both"))
	}
	if err := q.err(); err != nil {
		return reply{}, err
	}
	page, err := a.ops.store.Messages(c.ctx(), req)
	if err != nil {
		return reply{}, inResource(err, resSession)
	}
	page.Items = nonNil(page.Items)
	return ok(page), nil
}

// window: POST /v1/owners/{owner}/sessions/{id}/window.
func (a rest) window(c *call, b *windowBody) (reply, error) {
	return replyOf(a.ops.window(c.ctx(), memory.WindowRequest{
		Owner: c.owner(), SessionID: c.id(),
		Strategy: b.Strategy, Budget: b.Budget, FreshTail: b.FreshTail, Last: b.Last,
	}))
}

// compactSession: POST /v1/owners/{owner}/sessions/{id}/compact, app and
// admin tokens (it spends the runtime's LLM budget; the summarize job
// compacts every session over the threshold anyway).
func (a rest) compactSession(c *call, b *compactBody) (reply, error) {
	res, err := a.ops.store.CompactSession(c.ctx(), memory.CompactSessionRequest{
		Owner: c.owner(), SessionID: c.id(), Mode: b.Mode, Force: b.Force,
	})
	if err != nil {
		return reply{}, inResource(err, resSession)
	}
	res.Roots = nonNil(res.Roots)
	return ok(res), nil
}

// scopeIDMessage is what a malformed owner, agent or session id is told.
const scopeIDMessage = "must be 1-256 characters of letters, digits and . _ : @ + -, starting with a letter or digit"
