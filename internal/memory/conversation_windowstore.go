package memory

import (
	"context"
	"slices"
)

const (
	// firstWindowPage and maxWindowPage size the backward pages Window loads
	// (doubling): a window never reads a long session whole.
	firstWindowPage = 64
	maxWindowPage   = 4096
)

// windowParams resolves a request's zero fields from the policy.
func (s *Store) windowParams(req WindowRequest, fe *fieldErrors) windowParams {
	d := s.policy.Conversation.Window
	p := windowParams{Strategy: req.Strategy, Budget: req.Budget, FreshTail: req.FreshTail, BufferSize: req.Last}
	if p.Strategy == "" {
		p.Strategy = d.Strategy
	}
	switch p.Strategy {
	case WindowBuffer, WindowToken, WindowSummary:
	default:
		fe.add("strategy", "%q must be buffer, token or summary", req.Strategy)
	}
	resolve := func(field string, v *int, def, maxV int) {
		if *v == 0 {
			*v = def
		}
		if *v < 1 || *v > maxV {
			fe.add(field, "%d must be within 1..%d (0 = the policy's default)", *v, maxV)
		}
	}
	resolve("budget", &p.Budget, d.Budget, MaxWindowBudget)
	resolve("freshTail", &p.FreshTail, d.FreshTail, MaxFreshTail)
	resolve("last", &p.BufferSize, d.BufferSize, MaxBufferSize)
	return p
}

// Window builds a context window of a session: it loads the session's
// newest messages page by page, backwards, only as far as the strategy can
// use them (windowNeedsMore), plus the root summaries for the summary
// strategy, then assembles the window with the pure assembleWindow.
func (s *Store) Window(ctx context.Context, req WindowRequest) (*Window, error) {
	fe := &fieldErrors{}
	sessionKey(fe, req.Owner, req.SessionID)
	p := s.windowParams(req, fe)
	if err := fe.err(); err != nil {
		return nil, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, s.dbErr("begin", err)
	}
	// One snapshot for the session, its roots and its messages: an append
	// or a compaction in between cannot make them disagree.
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`); err != nil {
		return nil, s.dbErr("window snapshot", err)
	}
	sess, err := s.getSession(ctx, tx, req.Owner, req.SessionID, "")
	if err != nil {
		return nil, err
	}
	var roots []Summary
	if p.Strategy == WindowSummary && sess.SummaryCount > 0 {
		if roots, err = s.rootSummaries(ctx, tx, req.Owner, req.SessionID); err != nil {
			return nil, err
		}
	}
	var msgs []ConversationMessage
	page := max(firstWindowPage, p.FreshTail, min(p.BufferSize, maxWindowPage))
	before := sess.MessageCount + 1
	for before > 1 {
		older, err := s.queryMessages(ctx, tx, `SELECT `+messageColumns+` FROM `+s.sql.messages+` AS g
			WHERE g.owner_id = $1 AND g.session_id = $2 AND g.seq < $3 ORDER BY g.seq DESC LIMIT $4`,
			req.Owner, req.SessionID, before, page)
		if err != nil {
			return nil, err
		}
		if len(older) == 0 {
			break
		}
		slices.Reverse(older)
		msgs = append(older, msgs...)
		before = msgs[0].Seq
		if !windowNeedsMore(p, msgs, roots) {
			break
		}
		page = min(page*2, maxWindowPage)
	}
	return assembleWindow(p, msgs, roots, sess.MessageCount), nil
}
