package conversation

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/textguard"
)

// maxMessagesRead bounds one Messages call; a client reads a longer range
// page by page (From = the last seq + 1).
const maxMessagesRead = 1000

// preparedMessage is a validated, redacted message ready to store.
type preparedMessage struct {
	msg     TurnMessage // Content redacted
	tokens  int
	flagged bool
	vec     []float32 // nil when the embedder failed
	// next is the next embedder's vector during a re-embed (core.Next);
	// nil: embedding_next is not written.
	next []float32
}

// AppendTurn appends one turn (1..limits.maxMessagesPerTurn messages)
// atomically. Appends to one session are serialized by a row lock on the
// session (SELECT ... FOR UPDATE), which also hands out seq from next_seq,
// so concurrent appends get strictly increasing, gap-free seq. Every message
// is validated, redacted and guarded exactly like a memory write; a refused
// message is a *ValidationError naming it (messages[i].content) and nothing
// of the turn is stored. A tool message must carry toolCallId. Appending to
// an archived session is ErrConflict; to an unknown (or another owner's)
// session core.ErrNotFound. An append that would pass the session's or the
// turn's limits (limits.maxMessagesPerSession,
// maxTurnMessages, maxTurnTokens: a turn spans appends) is a *QuotaError,
// and nothing of it is stored. Every message is stored with req.Source
// (empty: agent), which later caps the source of facts extracted from it.
func (s *Store) AppendTurn(ctx context.Context, req AppendRequest) (*AppendResult, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(req.Owner, req.SessionID)
	src := fe.Source(req.Source)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	prepared, redactions, err := s.prepareTurn(req.Messages, fe)
	if err != nil {
		return nil, err
	}
	s.embedMessages(ctx, prepared)
	res := &AppendResult{Redactions: redactions}
	dualDone := 0
	err = s.core.InTx(ctx, func(tx pgx.Tx) error {
		// First: the re-embed's row before any table with a vector.
		dual, err := s.holdNext(ctx, tx, prepared)
		if err != nil {
			return err
		}
		sess, err := s.getSession(ctx, tx, req.Owner, req.SessionID, " FOR UPDATE")
		if err != nil {
			return err
		}
		if sess.Archived {
			return core.Conflictf("session %q is archived; unarchive it to append", req.SessionID)
		}
		if err := s.checkAppendLimits(ctx, tx, sess, prepared); err != nil {
			return err
		}
		res.Messages, err = s.insertMessages(ctx, tx, req.Owner, req.SessionID, src, sess.MessageCount+1, prepared)
		if err != nil {
			return err
		}
		dualDone = dual
		updated, err := s.bumpSession(ctx, tx, req.Owner, req.SessionID, res.Messages)
		if err != nil {
			return err
		}
		res.Session = *updated
		return nil
	})
	if err != nil {
		return nil, err
	}
	if dualDone > 0 {
		s.core.NextDone(dualDone)
	}
	res.CompactionDue = s.compactionDue(&res.Session)
	s.fitEcho(res, req.MaxBytes)
	return res, nil
}

// fitEcho cuts the stored messages an append answers with to those that
// fit the byte cap, oldest first: the JSON of a message can be 6 times its
// text, so without it one append of --max-body-bytes would be answered
// with six times as much. The turn is stored whole either way; the
// Truncation names the seq range the message list reads back.
func (s *Store) fitEcho(res *AppendResult, maxBytes int) {
	all := res.Messages
	res.Messages = []Message{}
	n := core.FitRanked(core.NewAnswerBytes(s.core.AnswerCap(maxBytes), res), all)
	res.Messages = all[:n]
	if n < len(all) {
		res.Omit(all[n].Seq, all[len(all)-1].Seq+1)
	}
}

// compactionDue: the session's unsummarized tokens exceed the threshold
// share of the default window budget.
func (s *Store) compactionDue(sess *Session) bool {
	c := s.core.Policy.Conversation
	return float64(sess.UnsummarizedTokens) > c.Compaction.Threshold*float64(c.Window.Budget)
}

// prepareTurn validates every message, then redacts and guards each one;
// it returns every problem at once, naming messages[i].<field>.
func (s *Store) prepareTurn(msgs []TurnMessage, fe *core.FieldErrors) ([]preparedMessage, []string, error) {
	lim := s.core.Policy.Conversation.Limits
	if len(msgs) == 0 {
		fe.Add("messages", "at least one message is required")
	} else if len(msgs) > lim.MaxMessagesPerTurn {
		fe.Add("messages", "%d messages is more than the limit of %d per turn", len(msgs), lim.MaxMessagesPerTurn)
	}
	if err := fe.Err(); err != nil {
		return nil, nil, err
	}
	out := make([]preparedMessage, len(msgs))
	var redactions []string
	for i, m := range msgs {
		mf := &core.FieldErrors{Prefix: fmt.Sprintf("messages[%d].", i)}
		validateTurnMessage(mf, m, core.RawContentLimit(lim.MaxMessageBytes))
		if mf.Len() == 0 && m.Content != "" {
			c, _ := s.core.CleanWithin("content", m.Content, lim.MaxMessageBytes, mf)
			m.Content = c.Text
			out[i].flagged = len(c.Flags) > 0
			for _, r := range c.Redactions {
				if !slices.Contains(redactions, r) {
					redactions = append(redactions, r)
				}
			}
		}
		fe.Append(mf)
		out[i].msg, out[i].tokens = m, core.CountTokens(m.Content)
	}
	if err := fe.Err(); err != nil {
		return nil, nil, err
	}
	return out, redactions, nil
}

// validateTurnMessage checks one message's fields. Content is required
// except on an assistant message that calls a tool (toolCallId set), which
// model APIs send without text.
func validateTurnMessage(fe *core.FieldErrors, m TurnMessage, maxRaw int) {
	switch m.Role {
	case RoleUser, RoleAssistant, RoleSystem, RoleTool:
	default:
		fe.Add("role", "%q must be user, assistant, system or tool", m.Role)
	}
	if m.ToolName != "" && !core.ValidToolRef(m.ToolName) {
		fe.Add("toolName", core.ToolRefRule)
	}
	if m.ToolCallID != "" && !core.ValidToolRef(m.ToolCallID) {
		fe.Add("toolCallId", core.ToolRefRule)
	}
	if m.Role == RoleTool && m.ToolCallID == "" {
		fe.Add("toolCallId", "is required for a tool message: it links the result to the assistant's call")
	}
	if (m.Role == RoleUser || m.Role == RoleSystem) && (m.ToolName != "" || m.ToolCallID != "") {
		fe.Add("toolCallId", "toolName and toolCallId belong to assistant and tool messages only")
	}
	if m.Content == "" && m.Role == RoleAssistant && m.ToolCallID != "" {
		return
	}
	fe.Text("content", m.Content, maxRaw)
}

// embedMessages embeds the turn's texts in one call for history search.
// Best effort: a failing embedder must not lose the conversation, so the
// messages are stored without a vector (found by full text only) and the
// failure is logged.
func (s *Store) embedMessages(ctx context.Context, ms []preparedMessage) {
	var texts []string
	var idx []int
	for i, m := range ms {
		if m.msg.Content != "" {
			texts, idx = append(texts, m.msg.Content), append(idx, i)
		}
	}
	if len(texts) == 0 {
		return
	}
	next := s.core.NextVectors(ctx, texts) // during a re-embed, alongside
	vecs, err := s.core.Embedder.Embed(ctx, texts)
	nexts := next()
	if err != nil || len(vecs) != len(texts) {
		s.core.Log.Warn("storing conversation messages without embeddings", "error", err, "vectors", len(vecs), "texts", len(texts))
		return
	}
	for j, i := range idx {
		ms[i].vec = vecs[j]
		if nexts != nil {
			ms[i].next = nexts[j]
		}
	}
}

// holdNext checks, first in the append's transaction, that the tenant
// still re-embeds toward the next embedder of the messages' next vectors
// and holds it until the commit (core.State.NextHeld); when it no longer
// does, the messages are stored without them. It returns how many
// messages carry a next vector.
func (s *Store) holdNext(ctx context.Context, tx pgx.Tx, ms []preparedMessage) (int, error) {
	n := 0
	for _, m := range ms {
		if m.next != nil {
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	held, err := s.core.NextHeld(ctx, tx)
	if err != nil || held {
		return n, err
	}
	for i := range ms {
		ms[i].next = nil
	}
	return 0, nil
}

// insertMessages stores the turn from seq first on, in one batch, every
// message with source src.
func (s *Store) insertMessages(ctx context.Context, tx pgx.Tx, owner, session string, src core.Source, first int64, ms []preparedMessage) ([]Message, error) {
	textConfig, err := s.core.WriteTextConfig(ctx, tx) // the stored vector's (migration 19)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	for i, m := range ms {
		flags := []string{}
		if m.flagged {
			flags = []string{textguard.FlagInjection}
		}
		// Vectors go as pgv.Vector values (nil: NULL): a *pgv.Vector is a
		// driver.Valuer, which pgx encodes by formatting it as text and
		// parsing that back (issue 32: ~10 % of an append's CPU).
		var vec, next any
		if m.vec != nil {
			vec = pgv.NewVector(m.vec)
		}
		col, val := "", ""
		if m.next != nil {
			next, col, val = pgv.NewVector(m.next), ", embedding_next", ", $13"
		}
		args := []any{owner, session, first + int64(i), string(m.msg.Role), m.msg.Content, m.msg.ToolName, m.msg.ToolCallID, m.tokens, flags, vec, string(src),
			textConfig}
		if next != nil {
			args = append(args, next)
		}
		b.Queue(`INSERT INTO `+s.sql.messages+` (owner_id, session_id, seq, role, content, tool_name, tool_call_id, tokens, flags, embedding, source,
				tsv_config, tsv_local`+col+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, `+core.TextLocal("$12", "$5")+val+`) RETURNING created_at`, args...)
	}
	br := tx.SendBatch(ctx, b)
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = Message{Seq: first + int64(i), Role: m.msg.Role, Content: m.msg.Content, ToolName: m.msg.ToolName,
			ToolCallID: m.msg.ToolCallID, Tokens: m.tokens, Source: src}
		if m.flagged {
			out[i].Flags = []string{textguard.FlagInjection}
		}
		if err := br.QueryRow().Scan(&out[i].CreatedAt); err != nil {
			_ = br.Close()
			return nil, core.DBErr("storing messages", err)
		}
		out[i].CreatedAt = out[i].CreatedAt.UTC()
	}
	if err := br.Close(); err != nil {
		return nil, core.DBErr("storing messages", err)
	}
	return out, nil
}

// bumpSession adds the stored turn to the session's counters.
func (s *Store) bumpSession(ctx context.Context, tx pgx.Tx, owner, session string, ms []Message) (*Session, error) {
	tokens := 0
	for _, m := range ms {
		tokens += m.Tokens
	}
	c, err := ScanSession(tx.QueryRow(ctx, `UPDATE `+s.sql.sessions+` AS c SET
			message_count = message_count + $3, next_seq = next_seq + $3, token_count = token_count + $4, last_active_at = now()
		WHERE c.owner_id = $1 AND c.id = $2 RETURNING `+SessionColumns, owner, session, len(ms), tokens))
	if err != nil {
		return nil, core.DBErr("updating session counters", err)
	}
	return &c, nil
}

// MessageColumns are selected (alias g) wherever a Message is
// returned; scanMessage reads them in this order.
const MessageColumns = `g.seq, g.role, g.content, g.tool_name, g.tool_call_id, g.tokens, g.created_at, g.flags, g.source`

func scanMessage(row pgx.Row) (Message, error) {
	var m Message
	var role, src string
	if err := row.Scan(&m.Seq, &role, &m.Content, &m.ToolName, &m.ToolCallID, &m.Tokens, &m.CreatedAt, &m.Flags, &src); err != nil {
		return m, err
	}
	m.Role, m.Source, m.CreatedAt = Role(role), core.Source(src), m.CreatedAt.UTC()
	if len(m.Flags) == 0 {
		m.Flags = nil
	}
	return m, nil
}

// messageRange reads [from, to) in seq order, at most limit messages.
func (s *Store) messageRange(ctx context.Context, q core.RowsQuerier, owner, session string, from, to int64, limit int) ([]Message, error) {
	return s.QueryMessages(ctx, q, `SELECT `+MessageColumns+` FROM `+s.sql.messages+` AS g
		WHERE g.owner_id = $1 AND g.session_id = $2 AND g.seq >= $3 AND g.seq < $4 ORDER BY g.seq LIMIT $5`,
		owner, session, from, to, limit)
}

// LastMessages reads the newest n messages, in seq order.
func (s *Store) LastMessages(ctx context.Context, q core.RowsQuerier, owner, session string, n int) ([]Message, error) {
	out, err := s.QueryMessages(ctx, q, `SELECT `+MessageColumns+` FROM `+s.sql.messages+` AS g
		WHERE g.owner_id = $1 AND g.session_id = $2 ORDER BY g.seq DESC LIMIT $3`, owner, session, n)
	slices.Reverse(out)
	return out, err
}

func (s *Store) QueryMessages(ctx context.Context, q core.RowsQuerier, sql string, args ...any) ([]Message, error) {
	return s.scanMessages(ctx, q, func(Message) (bool, bool) { return true, true }, sql, args...)
}
