package server

import (
	"context"
	"errors"

	"github.com/engram-dev/engram/internal/memory"
)

// Capabilities of conversation memory that REST and MCP share
// (docs/conversation.md). A not-found of these names the session or the
// summary, never a memory.

// createSession creates a session of an owner.
func (o *ops) createSession(ctx context.Context, req memory.CreateSessionRequest) (*memory.Session, error) {
	sess, err := o.store.CreateSession(ctx, req)
	return sess, inResource(err, resSession)
}

// appendTurn stores one turn of a session atomically.
func (o *ops) appendTurn(ctx context.Context, req memory.AppendRequest) (*memory.AppendResult, error) {
	res, err := o.store.AppendTurn(ctx, req)
	if err != nil {
		return nil, inResource(err, resSession)
	}
	res.Messages = nonNil(res.Messages)
	return res, nil
}

// appendCreating is appendTurn that creates the session on its first
// turn (the MCP tool's way: an agent over MCP has no other way to).
func (o *ops) appendCreating(ctx context.Context, req memory.AppendRequest, agent string) (*memory.AppendResult, error) {
	res, err := o.appendTurn(ctx, req)
	if !errors.Is(err, memory.ErrNotFound) {
		return res, err
	}
	_, cerr := o.createSession(ctx, memory.CreateSessionRequest{Owner: req.Owner, ID: req.SessionID, Agent: agent})
	if cerr != nil && !errors.Is(cerr, memory.ErrConflict) { // a concurrent first turn created it
		return nil, cerr
	}
	return o.appendTurn(ctx, req)
}

// window is the part of a session that fits the next prompt.
func (o *ops) window(ctx context.Context, req memory.WindowRequest) (*memory.Window, error) {
	win, err := o.store.Window(ctx, req)
	if err != nil {
		return nil, inResource(err, resSession)
	}
	win.Items = nonNil(win.Items)
	return win, nil
}

// expand is the original messages a summary replaced.
func (o *ops) expand(ctx context.Context, req memory.ExpandRequest) (*memory.Expansion, error) {
	exp, err := o.store.ExpandSummary(ctx, req)
	if err != nil {
		return nil, inResource(err, resSummary)
	}
	exp.Messages = nonNil(exp.Messages)
	return exp, nil
}

// searchHistory searches what was said; a sessionId the owner does not
// have is ErrNotFound, like every other route that names a session (the
// engine would find nothing in it, which would not tell a typo from a
// quiet session).
func (o *ops) searchHistory(ctx context.Context, req memory.HistorySearchRequest) (*memory.HistorySearchResult, error) {
	if req.SessionID != "" && memory.ValidScopeID(req.SessionID) {
		if _, err := o.store.GetSession(ctx, req.Owner, req.SessionID); err != nil {
			return nil, inResource(err, resSession)
		}
	}
	res, err := o.store.SearchHistory(ctx, req)
	if err != nil {
		return nil, inResource(err, resSession)
	}
	res.Results = nonNil(res.Results)
	return res, nil
}
