package conversation

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

const (
	// firstWindowPage and maxWindowPage size the backward pages Window loads
	// (doubling): a window never reads a long session whole.
	firstWindowPage = 64
	maxWindowPage   = 4096
)

// windowParams resolves a request's zero fields from the policy.
func (s *Store) windowParams(req WindowRequest, fe *core.FieldErrors) WindowParams {
	d := s.core.Policy.Conversation.Window
	p := WindowParams{Strategy: req.Strategy, Budget: req.Budget, FreshTail: req.FreshTail, BufferSize: req.Last,
		MaxBytes: s.core.AnswerCap(req.MaxBytes)}
	if p.Strategy == "" {
		p.Strategy = d.Strategy
	}
	switch p.Strategy {
	case policy.WindowBuffer, policy.WindowToken, policy.WindowSummary:
	default:
		fe.Add("strategy", "%q must be buffer, token or summary", req.Strategy)
	}
	resolve := func(field string, v *int, def, maxV int) {
		if *v == 0 {
			*v = def
		}
		if *v < 1 || *v > maxV {
			fe.Add(field, "%d must be within 1..%d (0 = the policy's default)", *v, maxV)
		}
	}
	resolve("budget", &p.Budget, d.Budget, policy.MaxWindowBudget)
	resolve("freshTail", &p.FreshTail, d.FreshTail, policy.MaxFreshTail)
	resolve("last", &p.BufferSize, d.BufferSize, policy.MaxBufferSize)
	return p
}

// Window builds a context window of a session: it loads the session's
// newest messages page by page, backwards, only as far as the strategy can
// use them (WindowNeedsMore) and never much past the byte
// cap, plus the root summaries for the summary strategy, then assembles
// the window with the pure AssembleWindow.
func (s *Store) Window(ctx context.Context, req WindowRequest) (*Window, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(req.Owner, req.SessionID)
	p := s.windowParams(req, fe)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	// One snapshot for the session, its roots and its messages: an append
	// or a compaction in between cannot make them disagree. The BEGIN
	// names the isolation (one round trip; a SET TRANSACTION after it was
	// a second, issue 32).
	tx, err := s.core.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, core.DBErr("begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	sess, err := s.getSession(ctx, tx, req.Owner, req.SessionID, "")
	if err != nil {
		return nil, err
	}
	var roots []Summary
	if p.Strategy == policy.WindowSummary && sess.SummaryCount > 0 {
		if roots, err = s.rootSummaries(ctx, tx, req.Owner, req.SessionID); err != nil {
			return nil, err
		}
	}
	msgs, load, err := s.windowMessages(ctx, tx, req, p, sess.MessageCount, roots)
	if err != nil {
		return nil, err
	}
	if load.TailSeq, load.TailTokens, err = s.windowTailPrefix(ctx, tx, req, p, msgs, sess.MessageCount); err != nil {
		return nil, err
	}
	return AssembleWindow(p, msgs, roots, sess.MessageCount, load), nil
}

// messageStubColumns are MessageColumns without the content.
const messageStubColumns = `g.seq, g.role, '', g.tool_name, g.tool_call_id, g.tokens, g.created_at, g.flags, g.source`

// windowMessages loads the newest messages a window can use, page by page
// backwards. Once the loaded content passes the byte cap (the row that
// passes it included), older pages are loaded without content (stubs): the
// window can give none of them, but its rules see what they would have
// chosen, so a session of huge messages is never read whole.
func (s *Store) windowMessages(ctx context.Context, tx pgx.Tx, req WindowRequest, p WindowParams, count int64, roots []Summary) ([]Message, WindowLoad, error) {
	var msgs []Message
	var load WindowLoad
	page := max(firstWindowPage, p.FreshTail, min(p.BufferSize, maxWindowPage))
	before, loaded := count+1, 0
	for before > 1 {
		const query = ` FROM %s AS g WHERE g.owner_id = $1 AND g.session_id = $2 AND g.seq < $3 ORDER BY g.seq DESC LIMIT $4`
		var older []Message
		var err error
		if loaded > p.MaxBytes {
			older, err = s.QueryMessages(ctx, tx, `SELECT `+messageStubColumns+fmt.Sprintf(query, s.sql.messages),
				req.Owner, req.SessionID, before, page)
			load.Stubs += len(older)
		} else {
			older, err = s.queryMessagesUntil(ctx, tx, p.MaxBytes-loaded, `SELECT `+MessageColumns+fmt.Sprintf(query, s.sql.messages),
				req.Owner, req.SessionID, before, page)
			loaded += ContentBytes(older)
		}
		if err != nil {
			return nil, load, err
		}
		if len(older) == 0 {
			break
		}
		slices.Reverse(older)
		msgs = append(older, msgs...)
		before = msgs[0].Seq
		if !WindowNeedsMore(p, msgs, roots) {
			break
		}
		page = min(page*2, maxWindowPage)
	}
	return msgs, load, nil
}

// windowTailPrefix finds where the fresh tail starts when that is before
// the loaded messages (they hold no turn start at or before the tail's
// first message, and loading stopped at the budget): the
// latest turn start at or before the tail's first message, else the first
// after it, and the tokens from there to the first loaded message.
func (s *Store) windowTailPrefix(ctx context.Context, tx pgx.Tx, req WindowRequest, p WindowParams, msgs []Message, count int64) (int64, int, error) {
	if len(msgs) == 0 || msgs[0].Seq <= 1 {
		return 0, 0, nil
	}
	for i := len(msgs) - p.FreshTail; i >= 0; i-- {
		if IsTurnStart(msgs[i]) {
			return 0, 0, nil
		}
	}
	anchor := max(1, count-int64(p.FreshTail)+1)
	var start *int64
	var tokens int64
	err := tx.QueryRow(ctx, `WITH t AS (SELECT coalesce(
			(SELECT max(g.seq) FROM `+s.sql.messages+` AS g WHERE g.owner_id = $1 AND g.session_id = $2
				AND g.seq <= $3 AND g.role IN ('user', 'system')),
			(SELECT min(g.seq) FROM `+s.sql.messages+` AS g WHERE g.owner_id = $1 AND g.session_id = $2
				AND g.seq > $3 AND g.seq < $4 AND g.role IN ('user', 'system'))) AS start)
		SELECT t.start, coalesce((SELECT sum(g.tokens) FROM `+s.sql.messages+` AS g WHERE g.owner_id = $1
			AND g.session_id = $2 AND g.seq >= t.start AND g.seq < $4), 0)::bigint FROM t`,
		req.Owner, req.SessionID, anchor, msgs[0].Seq).Scan(&start, &tokens)
	if err != nil {
		return 0, 0, core.DBErr("finding the fresh tail's start", err)
	}
	if start == nil {
		return 0, 0, nil // no turn start before the loaded part: the tail starts in it
	}
	return *start, int(tokens), nil
}
