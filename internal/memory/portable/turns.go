package portable

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// An import holds sessions to the limits an append is held to: a turn (a
// user or system message and what follows it, conversation.IsTurnStart)
// of at most limits.maxTurnMessages messages and maxTurnTokens tokens. A
// window reads its fresh tail's turn whole, so a file of one turn of
// 20,000 messages made every window of that session load them all (issue
// 26, eighteenth review, MEDIUM 2). A session's messages arrive in one
// request (the importer sends whole owners), so the file's are all there
// are; a session already in the tenant keeps its messages (they count as
// existing).

// checkTurns adds an error naming the message that takes a turn of one of
// g's sessions past a limit.
func (c checker) checkTurns(g *ownerRecords, at func(line int) checker) {
	lim := c.policy.Conversation.Limits
	if lim.MaxTurnMessages <= 0 && lim.MaxTurnTokens <= 0 {
		return
	}
	bySession := map[string][]record{}
	for _, r := range g.byKind[KindMessage] {
		m := r.value.(*messageRec)
		bySession[m.SessionID] = append(bySession[m.SessionID], r)
	}
	for _, id := range slices.Sorted(maps.Keys(bySession)) {
		msgs := bySession[id]
		slices.SortFunc(msgs, func(a, b record) int { return cmp.Compare(a.value.(*messageRec).Seq, b.value.(*messageRec).Seq) })
		if r, msg := overTurn(msgs, lim.MaxTurnMessages, lim.MaxTurnTokens); msg != "" {
			at(r.line).add("seq", "%s", msg)
		}
	}
}

// overTurn walks one session's messages in seq order and returns the
// first that takes its turn past maxMessages or maxTokens (0: no limit).
func overTurn(msgs []record, maxMessages, maxTokens int) (record, string) {
	var messages, tokens int64
	for _, r := range msgs {
		m := r.value.(*messageRec)
		if m.Role == "user" || m.Role == "system" { // conversation.IsTurnStart
			messages, tokens = 0, 0
		}
		messages++
		tokens += m.Tokens
		switch {
		case maxMessages > 0 && messages > int64(maxMessages):
			return r, fmt.Sprintf("message %d takes its turn past limits.maxTurnMessages (%d) of this runtime's policy", m.Seq, maxMessages)
		case maxTokens > 0 && tokens > int64(maxTokens):
			return r, fmt.Sprintf("message %d takes its turn past limits.maxTurnTokens (%d) of this runtime's policy", m.Seq, maxTokens)
		}
	}
	return record{}, ""
}
