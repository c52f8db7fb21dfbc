package conversation

import (
	"context"
	"slices"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Reads of a session's messages bounded by bytes as well as by rows: the
// rows are scanned one at a time and the scan stops where the answer is
// full, so a range of large messages never sits in memory whole.

// Messages reads a seq range [From, To) (0 leaves a side open) or the last
// N messages, in seq order: at most 1000 messages (the first of the range,
// or the newest of the last N) and at most the byte cap of JSON. What the
// request covered beyond that is named in the page's Truncation.
func (s *Store) Messages(ctx context.Context, req MessagesRequest) (*MessagePage, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(req.Owner, req.SessionID)
	if req.From < 0 || req.To < 0 || (req.To > 0 && req.To < req.From) {
		fe.Add("from", "the range [from, to) must have 0 <= from <= to (0 = open)")
	}
	if req.Last < 0 || req.Last > maxMessagesRead {
		fe.Add("last", "%d must be within 0..%d", req.Last, maxMessagesRead)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	sess, err := s.getSession(ctx, s.core.Pool, req.Owner, req.SessionID, "")
	if err != nil {
		return nil, err
	}
	// Bounded by the session as read, so a concurrent append cannot make
	// the range and the count disagree.
	end := sess.MessageCount + 1
	page := &MessagePage{Items: []Message{}}
	b := core.NewAnswerBytes(s.core.AnswerCap(req.MaxBytes), page)
	if req.Last > 0 {
		from := max(1, end-int64(req.Last))
		page.Items, err = s.scanMessages(ctx, s.core.Pool, fitting(b, nil), `SELECT `+MessageColumns+` FROM `+s.sql.messages+` AS g
			WHERE g.owner_id = $1 AND g.session_id = $2 AND g.seq >= $3 AND g.seq < $4 ORDER BY g.seq DESC`,
			req.Owner, req.SessionID, from, end)
		slices.Reverse(page.Items)
		page.Omit(from, seqOrEnd(page.Items, end))
		return page, err
	}
	from, to := max(1, req.From), end
	if req.To > 0 {
		to = min(req.To, end)
	}
	page.Items, err = s.scanMessages(ctx, s.core.Pool, fitting(b, nil), `SELECT `+MessageColumns+` FROM `+s.sql.messages+` AS g
		WHERE g.owner_id = $1 AND g.session_id = $2 AND g.seq >= $3 AND g.seq < $4 ORDER BY g.seq LIMIT $5`,
		req.Owner, req.SessionID, from, to, maxMessagesRead)
	if n := len(page.Items); n > 0 {
		from = page.Items[n-1].Seq + 1
	}
	page.Omit(from, to)
	return page, err
}

// seqOrEnd is the seq of the first message, end when there is none.
func seqOrEnd(msgs []Message, end int64) int64 {
	if len(msgs) > 0 {
		return msgs[0].Seq
	}
	return end
}

// visitFunc decides, for each message scanned, whether it is added and
// whether the scan reads on.
type visitFunc func(Message) (add, more bool)

// fitting adds messages while their JSON fits b (and, when tokens is not
// nil, while their tokens fit *tokens, which it lowers); it stops at the
// first that does not fit, leaving it out.
func fitting(b *core.AnswerBytes, tokens *int) visitFunc {
	return func(m Message) (bool, bool) {
		if tokens != nil && m.Tokens > *tokens {
			return false, false
		}
		if !b.Take(m) {
			return false, false
		}
		if tokens != nil {
			*tokens -= m.Tokens
		}
		return true, true
	}
}

// scanMessages reads the messages of sql one row at a time, as visit
// decides; the rows after it stops are discarded unread.
func (s *Store) scanMessages(ctx context.Context, q core.RowsQuerier, visit visitFunc, sql string, args ...any) ([]Message, error) {
	return scanRows(ctx, q, "messages", scanMessage, visit, sql, args...)
}

// queryMessagesUntil reads messages until their content passes maxContent
// bytes, the row that passes it included: a window loads what it may give
// and one message more, which tells it the cap was reached.
func (s *Store) queryMessagesUntil(ctx context.Context, q core.RowsQuerier, maxContent int, sql string, args ...any) ([]Message, error) {
	total := 0
	return s.scanMessages(ctx, q, func(m Message) (bool, bool) {
		total += len(m.Content)
		return true, total <= maxContent
	}, sql, args...)
}
