package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

const (
	// maxLeavesPerCompaction bounds one CompactSession: a session further
	// behind is caught up by the next call (or the next summarize run).
	maxLeavesPerCompaction = 1000
	// freshTailScan is how far back compaction looks for the turn start of
	// the fresh tail; when it finds none, nothing in that span is summarized.
	freshTailScan = 256
)

// summaryColumns are selected (alias y) wherever a Summary is returned.
const summaryColumns = `y.id::text, y.owner_id, y.session_id, y.depth, y.content, y.expand_hint, y.earliest_seq, y.latest_seq,
	y.earliest_at, y.latest_at, y.tokens, y.descendant_count, y.method, y.created_at`

func scanSummary(row pgx.Row, extra ...any) (Summary, error) {
	var y Summary
	dest := []any{&y.ID, &y.Owner, &y.SessionID, &y.Depth, &y.Content, &y.ExpandHint, &y.EarliestSeq, &y.LatestSeq,
		&y.EarliestAt, &y.LatestAt, &y.Tokens, &y.DescendantCount, &y.Method, &y.CreatedAt}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return y, err
	}
	y.EarliestAt, y.LatestAt, y.CreatedAt = y.EarliestAt.UTC(), y.LatestAt.UTC(), y.CreatedAt.UTC()
	return y, nil
}

func (s *Store) querySummaries(ctx context.Context, q core.RowsQuerier, sql string, args ...any) ([]Summary, error) {
	return scanRows(ctx, q, "summaries", func(r pgx.Row) (Summary, error) { return scanSummary(r) }, nil, sql, args...)
}

// rootSummaries are the summaries of a session no other covers, in seq order.
func (s *Store) rootSummaries(ctx context.Context, q core.RowsQuerier, owner, session string) ([]Summary, error) {
	return s.querySummaries(ctx, q, `SELECT `+summaryColumns+` FROM `+s.sql.summaries+` AS y
		WHERE y.owner_id = $1 AND y.session_id = $2 AND y.parent_id IS NULL ORDER BY y.earliest_seq`, owner, session)
}

// CompactSession summarizes a session's older messages into the summary
// DAG. Leaves cover contiguous chunks of compaction.chunkSize messages
// (extended to end before a turn start, so a tool result stays with its
// call) after the last summarized one and before the fresh tail; then runs
// of condenseGroupSize roots of one depth are condensed into a summary
// one deeper, up to compaction.maxDepth. Both modes summarize only messages
// no leaf covers yet (never re-summarizing), the last chunk even when it is
// short; incremental mode condenses complete groups only, full mode also
// condenses partial groups (of at least two) until nothing changes (a
// fixed point). Without Force no leaf is made unless the session's
// unsummarized tokens exceed the threshold. Messages are never changed or
// deleted.
//
// Summaries are written one per short transaction under the session's row
// lock, which also checks that nobody summarized the same messages in the
// meantime (two compactions never double-summarize; the loser stops). No
// transaction is open while the LLM works.
func (s *Store) CompactSession(ctx context.Context, req CompactSessionRequest) (*CompactSessionResult, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(req.Owner, req.SessionID)
	mode := req.Mode
	if mode == "" {
		mode = CompactIncremental
	}
	if mode != CompactIncremental && mode != CompactFull {
		fe.Add("mode", "%q must be incremental or full", req.Mode)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	sess, err := s.getSession(ctx, s.core.Pool, req.Owner, req.SessionID, "")
	if err != nil {
		return nil, err
	}
	res := &CompactSessionResult{}
	if req.Force || s.compactionDue(sess) {
		// Everything before the fresh tail is summarized, the last chunk
		// too when it is short: a session of few, long messages is due
		// long before it has chunkSize of them.
		if err := s.summarizeLeaves(ctx, sess, true, res); err != nil {
			return res, err
		}
	}
	if res.LeavesCreated > 0 || req.Force || mode == CompactFull {
		if err := s.condense(ctx, req.Owner, req.SessionID, mode == CompactFull, res); err != nil {
			return res, err
		}
	}
	roots, err := s.rootSummaries(ctx, s.core.Pool, req.Owner, req.SessionID)
	if err != nil {
		return res, err
	}
	// The roots a session keeps grow with it at the deepest level (a
	// policy of small chunks and groups keeps many): the answer holds the
	// oldest that fit the byte cap.
	res.Roots = []Summary{}
	n := core.FitRanked(core.NewAnswerBytes(s.core.AnswerCap(req.MaxBytes), res), roots)
	res.Roots = roots[:n]
	if n < len(roots) {
		res.RootsTruncated, res.RootsOmitted = true, len(roots)-n
	}
	return res, nil
}

// compactionEnd is the seq of the first message compaction must leave alone:
// the start of the fresh tail (policy freshTail, moved back to its turn
// start). When the turn start lies further back than compaction looks, the
// whole span looked at is left alone.
func (s *Store) compactionEnd(ctx context.Context, owner, session string, count int64) (int64, error) {
	k := s.core.Policy.Conversation.Window.FreshTail
	msgs, err := s.lastMessagesMeta(ctx, owner, session, k+freshTailScan)
	if err != nil || len(msgs) == 0 {
		return count + 1, err
	}
	f := FreshStart(msgs, k)
	if f > max(0, len(msgs)-k) && msgs[0].Seq > 1 {
		return msgs[0].Seq, nil
	}
	if f == len(msgs) {
		return msgs[len(msgs)-1].Seq + 1, nil
	}
	return msgs[f].Seq, nil
}

// lastMessagesMeta reads role and tokens of the newest n messages, in order
// (as ConversationMessages without content).
func (s *Store) lastMessagesMeta(ctx context.Context, owner, session string, n int) ([]Message, error) {
	rows, err := s.core.Pool.Query(ctx, `SELECT seq, role, tokens FROM `+s.sql.messages+`
		WHERE owner_id = $1 AND session_id = $2 ORDER BY seq DESC LIMIT $3`, owner, session, n)
	if err != nil {
		return nil, core.DBErr("reading messages", err)
	}
	out, err := pgx.CollectRows(rows, scanMessageMeta)
	slices.Reverse(out)
	return out, core.DBErr("reading messages", err)
}

// chunkRanges splits metas (consecutive messages, all eligible) into leaf
// chunks [from, to) of at least size messages, each ending before a turn
// start (or at end, the fresh tail's start). The last, shorter chunk is
// included only when partial is set.
func chunkRanges(metas []Message, end int64, size int, partial bool) [][2]int64 {
	var out [][2]int64
	for i := 0; i < len(metas) && len(out) < maxLeavesPerCompaction; {
		j := i + size
		for j < len(metas) && !IsTurnStart(metas[j]) {
			j++
		}
		if j >= len(metas) {
			if metas[len(metas)-1].Seq+1 != end || (len(metas)-i < size && !partial) {
				break
			}
			out = append(out, [2]int64{metas[i].Seq, end})
			break
		}
		out = append(out, [2]int64{metas[i].Seq, metas[j].Seq})
		i = j
	}
	return out
}

// summarizeLeaves creates the leaf summaries of the eligible messages.
func (s *Store) summarizeLeaves(ctx context.Context, sess *Session, partial bool, res *CompactSessionResult) error {
	cfg := s.core.Policy.Conversation.Compaction
	end, err := s.compactionEnd(ctx, sess.Owner, sess.ID, sess.MessageCount)
	if err != nil {
		return err
	}
	from := sess.SummarizedThrough + 1
	if from >= end {
		return nil
	}
	limit := int64(maxLeavesPerCompaction*cfg.ChunkSize) * 2
	rows, err := s.core.Pool.Query(ctx, `SELECT seq, role, tokens FROM `+s.sql.messages+`
		WHERE owner_id = $1 AND session_id = $2 AND seq >= $3 AND seq < $4 ORDER BY seq LIMIT $5`,
		sess.Owner, sess.ID, from, end, limit)
	if err != nil {
		return core.DBErr("planning compaction", err)
	}
	metas, err := pgx.CollectRows(rows, scanMessageMeta)
	if err != nil {
		return core.DBErr("planning compaction", err)
	}
	for _, ch := range chunkRanges(metas, end, cfg.ChunkSize, partial) {
		msgs, err := s.messageRange(ctx, s.core.Pool, sess.Owner, sess.ID, ch[0], ch[1], int(ch[1]-ch[0]))
		if err != nil {
			return err
		}
		in := make([]SummaryInput, len(msgs))
		tokens := 0
		for i, m := range msgs {
			in[i] = s.SummaryInput(m)
			tokens += m.Tokens
		}
		content, method := s.Summarize(ctx, in)
		leaf := Summary{ID: core.NewID(), Owner: sess.Owner, SessionID: sess.ID, Depth: 0, Content: content,
			EarliestSeq: ch[0], LatestSeq: ch[1] - 1, EarliestAt: msgs[0].CreatedAt, LatestAt: msgs[len(msgs)-1].CreatedAt,
			Tokens: core.CountTokens(content), DescendantCount: len(msgs), Method: method}
		leaf.ExpandHint = fmt.Sprintf("messages %d-%d (%d messages); expand this summary for the originals", ch[0], ch[1]-1, len(msgs))
		ok, err := s.storeLeaf(ctx, leaf, tokens)
		if err != nil {
			return err
		}
		if !ok {
			return nil // another compaction got there first
		}
		res.LeavesCreated++
		res.MessagesSummarized += len(msgs)
		res.Weaker(method)
	}
	return nil
}

// storeLeaf stores a leaf if the session's summaries still end right before
// it (checked under the session's row lock); false when they do not.
func (s *Store) storeLeaf(ctx context.Context, leaf Summary, tokens int) (bool, error) {
	vec := s.EmbedSummary(ctx, leaf.Content)
	stored := false
	err := s.core.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.HoldNext(ctx, tx, &vec); err != nil {
			return err
		}
		sess, err := s.getSession(ctx, tx, leaf.Owner, leaf.SessionID, " FOR UPDATE")
		if err != nil {
			return err
		}
		if sess.SummarizedThrough != leaf.EarliestSeq-1 {
			return nil
		}
		if err := s.insertSummary(ctx, tx, leaf, vec); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.sql.summarySources+` (summary_id, ord, from_seq, to_seq) VALUES ($1, 0, $2, $3)`,
			leaf.ID, leaf.EarliestSeq, leaf.LatestSeq+1); err != nil {
			return core.DBErr("storing summary sources", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.sql.sessions+` SET summarized_through = $3,
				summarized_tokens = summarized_tokens + $4, summary_count = summary_count + 1
			WHERE owner_id = $1 AND id = $2`, leaf.Owner, leaf.SessionID, leaf.LatestSeq, tokens); err != nil {
			return core.DBErr("updating session after compaction", err)
		}
		stored = true
		return nil
	})
	if err == nil && stored {
		s.NextDone(vec)
	}
	return stored, err
}

// condenseGroups picks groups of roots to condense: runs of consecutive
// roots of one depth below maxDepth, cut into groups of size; with partial,
// a last group of at least two is condensed too.
func condenseGroups(roots []Summary, size, maxDepth int, partial bool) [][]Summary {
	var out [][]Summary
	for i := 0; i < len(roots); {
		j := i
		for j < len(roots) && roots[j].Depth == roots[i].Depth {
			j++
		}
		if roots[i].Depth < maxDepth {
			for k := i; k < j; k += size {
				g := roots[k:min(k+size, j)]
				if len(g) == size || (partial && len(g) >= 2) {
					out = append(out, g)
				}
			}
		}
		i = j
	}
	return out
}

// condense condenses roots until no group is left (a fixed point): every
// round reads the roots again, so summaries made in one round are
// condensed in the next when they form a group.
func (s *Store) condense(ctx context.Context, owner, session string, partial bool, res *CompactSessionResult) error {
	cfg := s.core.Policy.Conversation.Compaction
	for round := 0; round <= policy.MaxSummaryDepth; round++ {
		roots, err := s.rootSummaries(ctx, s.core.Pool, owner, session)
		if err != nil {
			return err
		}
		groups := condenseGroups(roots, cfg.CondenseGroupSize, cfg.MaxDepth, partial)
		if len(groups) == 0 {
			return nil
		}
		for _, g := range groups {
			ok, err := s.condenseGroup(ctx, g, res)
			if err != nil {
				return err
			}
			if !ok {
				return nil // another compaction changed the roots
			}
		}
	}
	return nil
}

// condenseGroup summarizes a group of roots into one summary a level deeper.
func (s *Store) condenseGroup(ctx context.Context, g []Summary, res *CompactSessionResult) (bool, error) {
	in := make([]SummaryInput, len(g))
	desc := 0
	for i, c := range g {
		in[i] = ChildInput(c)
		desc += c.DescendantCount
	}
	content, method := s.Summarize(ctx, in)
	first, last := g[0], g[len(g)-1]
	y := Summary{ID: core.NewID(), Owner: first.Owner, SessionID: first.SessionID, Depth: first.Depth + 1, Content: content,
		EarliestSeq: first.EarliestSeq, LatestSeq: last.LatestSeq, EarliestAt: first.EarliestAt, LatestAt: last.LatestAt,
		Tokens: core.CountTokens(content), DescendantCount: desc + len(g), Method: method}
	y.ExpandHint = fmt.Sprintf("messages %d-%d in %d summaries; describe this summary for its children or expand it for the originals",
		y.EarliestSeq, y.LatestSeq, len(g))
	vec := s.EmbedSummary(ctx, content)
	stored := false
	err := s.core.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.HoldNext(ctx, tx, &vec); err != nil {
			return err
		}
		if _, err := s.getSession(ctx, tx, y.Owner, y.SessionID, " FOR UPDATE"); err != nil {
			return err
		}
		ids := make([]string, len(g))
		for i, c := range g {
			ids[i] = c.ID
		}
		tag, err := tx.Exec(ctx, `UPDATE `+s.sql.summaries+` SET parent_id = $1
			WHERE id = ANY($2::uuid[]) AND parent_id IS NULL`, y.ID, ids)
		if err != nil {
			return core.DBErr("condensing summaries", err)
		}
		if tag.RowsAffected() != int64(len(g)) {
			return errStale
		}
		if err := s.insertSummary(ctx, tx, y, vec); err != nil {
			return err
		}
		for i, id := range ids {
			if _, err := tx.Exec(ctx, `INSERT INTO `+s.sql.summarySources+` (summary_id, ord, child_id) VALUES ($1, $2, $3)`,
				y.ID, i, id); err != nil {
				return core.DBErr("storing summary sources", err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.sql.sessions+` SET summary_count = summary_count + 1
			WHERE owner_id = $1 AND id = $2`, y.Owner, y.SessionID); err != nil {
			return core.DBErr("updating session after compaction", err)
		}
		stored = true
		return nil
	})
	if errors.Is(err, errStale) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if stored {
		s.NextDone(vec)
	}
	res.CondensedCreated++
	res.Weaker(method)
	return stored, nil
}

// errStale rolls back a condensation whose children another compaction took.
var errStale = errors.New("summaries changed concurrently")
