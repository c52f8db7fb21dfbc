package memory

import (
	"errors"
	"fmt"
	"strings"
)

// newSession creates a session and fails the test on error.
func (f *fixture) newSession(owner, id string) *Session {
	f.t.Helper()
	s, err := f.store.CreateSession(ctx(f.t), CreateSessionRequest{Owner: owner, ID: id, Title: "t"})
	if err != nil {
		f.t.Fatalf("CreateSession(%s, %s): %v", owner, id, err)
	}
	return s
}

// appendTurn appends a turn and fails the test on error.
func (f *fixture) appendTurn(owner, session string, msgs ...TurnMessage) *AppendResult {
	f.t.Helper()
	r, err := f.store.AppendTurn(ctx(f.t), AppendRequest{Owner: owner, SessionID: session, Messages: msgs})
	if err != nil {
		f.t.Fatalf("AppendTurn: %v", err)
	}
	return r
}

// generatedContent is the content of message seq of a generated session:
// varied lengths, scripts (ASCII, CJK, emoji), newlines and tabs, so a
// byte-for-byte comparison means something.
func generatedContent(seq int) string {
	switch seq % 5 {
	case 0:
		return fmt.Sprintf("Message %d.\nIt has two lines\tand a tab. The weather in Lisbon is sunny today.", seq)
	case 1:
		return fmt.Sprintf("第%d条消息：我喜欢猫和咖啡。こんにちは。", seq)
	case 2:
		return fmt.Sprintf("msg %d 🚀 emoji and ünïcödé; %s", seq, strings.Repeat("long text ", seq%40))
	case 3:
		return fmt.Sprintf("Tool output %d: {\"temperature\": %d, \"unit\": \"C\"}", seq, seq%35)
	}
	return fmt.Sprintf("Short %d", seq)
}

// generatedRole cycles user, assistant (calling a tool), tool, assistant.
func generatedRole(seq int) (Role, string) {
	switch seq % 4 {
	case 1:
		return RoleUser, ""
	case 2:
		return RoleAssistant, fmt.Sprintf("call_%d", seq)
	case 3:
		return RoleTool, fmt.Sprintf("call_%d", seq-1)
	}
	return RoleAssistant, ""
}

// seedMessages bulk-inserts n generated messages (seq 1..n) into a new
// session as admin, in one INSERT, and sets the session's counters as
// appends would. It returns the messages as stored (source agent, the
// column's default).
func (f *fixture) seedMessages(owner, session string, n int) []ConversationMessage {
	f.t.Helper()
	f.newSession(owner, session)
	seqs, roles, contents, calls, tokens := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]int32, n)
	out := make([]ConversationMessage, n)
	total := 0
	for i := range n {
		seq := i + 1
		role, call := generatedRole(seq)
		c := generatedContent(seq)
		seqs[i], roles[i], contents[i], calls[i], tokens[i] = int64(seq), string(role), c, call, int32(CountTokens(c))
		out[i] = ConversationMessage{Seq: int64(seq), Role: role, Content: c, ToolCallID: call, Tokens: CountTokens(c), Source: SourceAgent}
		total += CountTokens(c)
	}
	_, err := f.admin.Exec(ctx(f.t), `INSERT INTO `+f.store.sql.messages+` (owner_id, session_id, seq, role, content, tool_call_id, tokens)
		SELECT $1, $2, s, r, c, t, k FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::int[]) AS u(s, r, c, t, k)`,
		owner, session, seqs, roles, contents, calls, tokens)
	if err != nil {
		f.t.Fatalf("seeding messages: %v", err)
	}
	_, err = f.admin.Exec(ctx(f.t), `UPDATE `+f.store.sql.sessions+` SET message_count = $3::bigint, next_seq = $3::bigint + 1, token_count = $4
		WHERE owner_id = $1 AND id = $2`, owner, session, n, total)
	if err != nil {
		f.t.Fatalf("seeding session counters: %v", err)
	}
	return out
}

// collectLeaves walks the DAG under id down to its leaves (DescribeSummary)
// and appends their message ranges in order.
func (f *fixture) collectLeaves(owner, id string, ranges *[][2]int64) {
	f.t.Helper()
	d, err := f.store.DescribeSummary(ctx(f.t), owner, id)
	if err != nil {
		f.t.Fatalf("DescribeSummary(%s): %v", id, err)
	}
	if d.Summary.Depth == 0 {
		if d.MessageRange == nil || len(d.Children) != 0 {
			f.t.Fatalf("leaf %s: range %v, %d children", id, d.MessageRange, len(d.Children))
		}
		*ranges = append(*ranges, *d.MessageRange)
		return
	}
	if len(d.Children) < 2 {
		f.t.Fatalf("condensed summary %s has %d children", id, len(d.Children))
	}
	for _, c := range d.Children {
		if c.Depth != d.Summary.Depth-1 {
			f.t.Errorf("child %s of depth %d under depth %d", c.ID, c.Depth, d.Summary.Depth)
		}
		cd, err := f.store.DescribeSummary(ctx(f.t), owner, c.ID)
		if err != nil || cd.ParentID != id {
			f.t.Fatalf("child %s: parent %q (want %q), %v", c.ID, cd.ParentID, id, err)
		}
		f.collectLeaves(owner, c.ID, ranges)
	}
}

// checkLossless expands every root of a session and checks that the
// summaries cover messages 1..SummarizedThrough exactly once, byte for
// byte, both through the DAG's leaves and through ExpandSummary (and,
// where an expansion is truncated by the byte cap, through the message
// list reading the range it names).
func (f *fixture) checkLossless(owner, session string, orig []ConversationMessage, res *CompactSessionResult) {
	f.t.Helper()
	sess, err := f.store.GetSession(ctx(f.t), owner, session)
	if err != nil {
		f.t.Fatal(err)
	}
	if sess.SummarizedThrough == 0 {
		f.t.Fatal("nothing was summarized")
	}
	var ranges [][2]int64
	var expanded []ConversationMessage
	for _, r := range res.Roots {
		f.collectLeaves(owner, r.ID, &ranges)
		e, err := f.store.ExpandSummary(ctx(f.t), ExpandRequest{Owner: owner, ID: r.ID, MaxTokens: MaxExpandTokens})
		if err != nil {
			f.t.Fatalf("ExpandSummary(%s): %v", r.ID, err)
		}
		expanded = append(expanded, e.Messages...)
		if e.Truncated {
			if e.OmittedTo != r.LatestSeq+1 || len(e.Messages) == 0 || e.OmittedFrom != e.Messages[len(e.Messages)-1].Seq+1 {
				f.t.Fatalf("root %s (%d..%d) truncated to %d messages, omitted %+v", r.ID, r.EarliestSeq, r.LatestSeq, len(e.Messages), e.Truncation)
			}
			expanded = append(expanded, f.readRange(owner, session, e.OmittedFrom, e.OmittedTo)...)
		}
	}
	next := int64(1)
	for _, rg := range ranges {
		if rg[0] != next {
			f.t.Fatalf("leaf ranges not contiguous: %v after %d", rg, next-1)
		}
		next = rg[1]
	}
	if next != sess.SummarizedThrough+1 {
		f.t.Fatalf("leaves cover up to %d, session says %d", next-1, sess.SummarizedThrough)
	}
	if int64(len(expanded)) != sess.SummarizedThrough {
		f.t.Fatalf("expanded %d messages, want %d", len(expanded), sess.SummarizedThrough)
	}
	for i, m := range expanded {
		o := orig[i]
		if m.Seq != o.Seq || m.Content != o.Content || m.Role != o.Role || m.ToolCallID != o.ToolCallID {
			f.t.Fatalf("expanded message %d = %+v, want %+v", i, m, o)
		}
	}
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// items are the messages of a page (nil with the error of a failed read).
func items(p *MessagePage, err error) ([]ConversationMessage, error) {
	if p == nil {
		return nil, err
	}
	return p.Items, err
}

// results are the hits of a history search (nil with the error of a failed one).
func results(r *HistorySearchResult, err error) ([]HistoryHit, error) {
	if r == nil {
		return nil, err
	}
	return r.Results, err
}

// readRange reads the messages [from, to) page by page, following the
// omitted range each page names.
func (f *fixture) readRange(owner, session string, from, to int64) []ConversationMessage {
	f.t.Helper()
	var out []ConversationMessage
	for from < to {
		p, err := f.store.Messages(ctx(f.t), MessagesRequest{Owner: owner, SessionID: session, From: from, To: to})
		if err != nil || len(p.Items) == 0 {
			f.t.Fatalf("reading [%d, %d): %v", from, to, err)
		}
		out = append(out, p.Items...)
		from = p.Items[len(p.Items)-1].Seq + 1
		if p.Truncated != (from < to) || (p.Truncated && p.OmittedFrom != from) {
			f.t.Fatalf("page up to %d says %+v for the range to %d", from-1, p.Truncation, to)
		}
	}
	return out
}
