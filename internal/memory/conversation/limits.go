package conversation

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Limits of a session and of a turn across appends. A turn is a user or
// system message and every message after it up to the next one
// (IsTurnStart); messages before a session's first user or
// system message form a turn of their own, so a client that never sends one is bounded as
// well. Both checks run in AppendTurn's transaction, after the session row
// is locked: concurrent appends to one session are serialized there, so
// none can pass a limit another one is being checked against.

// turnLength is the size of (part of) a turn.
type turnLength struct {
	messages, tokens int64
}

// checkAppendLimits refuses an append that would pass
// limits.maxMessagesPerSession, maxTurnMessages or
// maxTurnTokens, with a *QuotaError. sess is the session as locked.
func (s *Store) checkAppendLimits(ctx context.Context, tx pgx.Tx, sess *Session, ms []preparedMessage) error {
	lim := s.core.Policy.Conversation.Limits
	if err := core.OverQuota(core.QuotaMessagesPerSession, lim.MaxMessagesPerSession, sess.MessageCount, int64(len(ms)),
		"messages", "the session", "start a new session"); err != nil {
		return err
	}
	var open turnLength
	if !IsTurnStart(Message{Role: ms[0].msg.Role}) {
		var err error
		if open, err = s.openTurn(ctx, tx, sess); err != nil {
			return err
		}
	}
	return s.checkTurns(open, ms)
}

// checkTurns walks the appended messages turn by turn: the first part
// extends the open turn (stored), every turn start begins a new one. The
// first turn over a limit is refused, naming what is stored of it and
// what the append would add to it.
func (s *Store) checkTurns(open turnLength, ms []preparedMessage) error {
	lim := s.core.Policy.Conversation.Limits
	stored, added := open, turnLength{}
	check := func() error {
		const remedy = "start a new turn with a user message"
		if err := core.OverQuota(core.QuotaTurnMessages, lim.MaxTurnMessages, stored.messages, added.messages, "messages", "the turn", remedy); err != nil {
			return err
		}
		return core.OverQuota(core.QuotaTurnTokens, lim.MaxTurnTokens, stored.tokens, added.tokens, "tokens", "the turn", remedy)
	}
	for i, m := range ms {
		if IsTurnStart(Message{Role: m.msg.Role}) {
			if i > 0 {
				if err := check(); err != nil {
					return err
				}
			}
			stored, added = turnLength{}, turnLength{}
		}
		added.messages++
		added.tokens += int64(m.tokens)
	}
	return check()
}

// openTurn measures the session's last turn, reading at most
// maxTurnMessages rows (seq is gap-free: 1..MessageCount). When none of
// them starts a turn, the turn is at least that long, which is all the
// check needs to know: it is full.
func (s *Store) openTurn(ctx context.Context, tx pgx.Tx, sess *Session) (turnLength, error) {
	floor := max(0, sess.MessageCount-int64(s.core.Policy.Conversation.Limits.MaxTurnMessages))
	var start, tokens int64
	// max(seq) with this WHERE is answered by a backward scan of the
	// primary key that stops at the newest user or system message.
	err := tx.QueryRow(ctx, `SELECT t.start, (SELECT coalesce(sum(g.tokens), 0) FROM `+s.sql.messages+` AS g
			WHERE g.owner_id = $1 AND g.session_id = $2 AND g.seq >= t.start)
		FROM (SELECT coalesce(max(m.seq), $3 + 1) AS start FROM `+s.sql.messages+` AS m
			WHERE m.owner_id = $1 AND m.session_id = $2 AND m.seq > $3 AND m.role IN ('user', 'system')) AS t`,
		sess.Owner, sess.ID, floor).Scan(&start, &tokens)
	if err != nil {
		return turnLength{}, core.DBErr("measuring the open turn", err)
	}
	return turnLength{messages: sess.MessageCount - start + 1, tokens: tokens}, nil
}
