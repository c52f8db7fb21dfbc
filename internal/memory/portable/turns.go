package portable

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/engram-dev/engram/internal/memory/policy"
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

// checkSessions holds g's sessions to the rules above: whole (checkWhole)
// and within the turn limits.
func (c checker) checkSessions(g *ownerRecords, at func(line int) checker) {
	bySession := map[string][]record{}
	for _, r := range g.byKind[KindMessage] {
		m := r.value.(*messageRec)
		bySession[m.SessionID] = append(bySession[m.SessionID], r)
	}
	if !c.checkWhole(g, bySession, at) {
		return
	}
	c.checkTurns(bySession, at)
}

// maxImportedRoots bounds a session's summaries that no other covers: a
// summary window reads them all. Compaction condenses every complete group
// of condenseGroupSize roots of a depth (at most 64) one deeper, up to
// maxDepth (at most 8), so it leaves fewer than a group at each depth
// (nineteenth review of issue 26: 2,000 imported roots cost a window of
// budget 100 +7 MiB).
const maxImportedRoots = (policy.MaxSummaryDepth + 1) * policy.MaxCondenseGroupSize

// maxImportedRootBytes bounds the content of those roots together: a
// summary window reads them all, and shows at most an answer's byte cap
// (1 MiB) of them (twentieth review: 440 roots of 64 KiB cost every
// window +28 MiB).
const maxImportedRootBytes = 1 << 20

// checkWhole: an import brings whole sessions. Every message and summary
// comes with its session's line, so a second import cannot add messages
// to a session the tenant holds (the writer skips a session it has, with
// everything of it; issue 26, nineteenth review, MEDIUM 1); a session's
// messages have distinct seqs within 1..messageCount, and it has no more
// summaries than a compaction of its messages can make (each leaf covers
// a message or more, each condensed summary two or more summaries).
func (c checker) checkWhole(g *ownerRecords, bySession map[string][]record, at func(line int) checker) bool {
	sessions := map[string]*sessionRec{}
	for _, r := range g.byKind[KindSession] {
		v := r.value.(*sessionRec)
		sessions[v.ID] = v
	}
	ok := true
	refuse := func(line int, field, format string, args ...any) {
		at(line).add(field, format, args...)
		ok = false
	}
	for _, id := range slices.Sorted(maps.Keys(bySession)) {
		sess := sessions[id]
		seen := map[int64]bool{}
		for _, r := range bySession[id] {
			m := r.value.(*messageRec)
			switch {
			case sess == nil:
				refuse(r.line, "sessionId", "session %q is not in the import: an import brings whole sessions, each with its session line", id)
			case m.Seq > sess.MessageCount || seen[m.Seq]:
				refuse(r.line, "seq", "%d is past the session's messageCount (%d) or given twice", m.Seq, sess.MessageCount)
			}
			seen[m.Seq] = true
			if !ok {
				return false
			}
		}
	}
	summaries, roots, rootBytes := map[string]int64{}, map[string]int{}, map[string]int{}
	for _, r := range g.byKind[KindSummary] {
		v := r.value.(*summaryRec)
		sess := sessions[v.SessionID]
		if v.ParentID == nil {
			roots[v.SessionID]++
			rootBytes[v.SessionID] += len(v.Content)
		}
		summaries[v.SessionID]++
		if rootBytes[v.SessionID] > maxImportedRootBytes {
			refuse(r.line, "content", "session %q's summaries no other covers hold more than %d bytes, more than a summary window reads", v.SessionID, maxImportedRootBytes)
			return false
		}
		switch {
		case sess == nil:
			refuse(r.line, "sessionId", "session %q is not in the import: an import brings whole sessions, each with its session line", v.SessionID)
		case summaries[v.SessionID] > 2*sess.MessageCount:
			refuse(r.line, "sessionId", "session %q has more summaries than a compaction of its %d messages makes", v.SessionID, sess.MessageCount)
		case roots[v.SessionID] > maxImportedRoots:
			refuse(r.line, "parentId", "session %q has more than %d summaries no other covers; a compaction leaves fewer than a group at each depth", v.SessionID, maxImportedRoots)
		}
		if !ok {
			return false
		}
	}
	return c.checkSources(g, sessions, at)
}

// checkSources holds summary sources to compaction's shape: each comes
// with its summary in the file (so a second file cannot add sources to a
// summary the tenant holds), a summary has at most condenseGroupSize
// sources with distinct ords, a leaf's are message ranges of its session
// and a condensed summary's are summaries of the file one depth lower in
// the same session that it is the parent of (issue 26, twentieth review:
// 1,000 sources of one 64 KiB child made one describe answer 65.8 MB).
func (c checker) checkSources(g *ownerRecords, sessions map[string]*sessionRec, at func(line int) checker) bool {
	summaries := map[string]*summaryRec{}
	for _, r := range g.byKind[KindSummary] {
		v := r.value.(*summaryRec)
		summaries[v.ID] = v
	}
	ords := map[string]map[int64]bool{}
	for _, r := range g.byKind[KindSummarySource] {
		v := r.value.(*summarySourceRec)
		parent := summaries[v.SummaryID]
		if parent == nil {
			at(r.line).add("summaryId", "summary %s is not in the import: an import brings whole sessions, each summary with its sources", v.SummaryID)
			return false
		}
		if ords[v.SummaryID] == nil {
			ords[v.SummaryID] = map[int64]bool{}
		}
		if msg := sourceProblem(v, parent, summaries, sessions[parent.SessionID], ords[v.SummaryID]); msg != "" {
			at(r.line).add("summaryId", "%s", msg)
			return false
		}
		ords[v.SummaryID][v.Ord] = true
	}
	return true
}

// sourceProblem says why v cannot be a source of parent, or "".
func sourceProblem(v *summarySourceRec, parent *summaryRec, summaries map[string]*summaryRec, sess *sessionRec, ords map[int64]bool) string {
	switch {
	case len(ords) >= policy.MaxCondenseGroupSize || v.Ord >= policy.MaxCondenseGroupSize || ords[v.Ord]:
		return fmt.Sprintf("summary %s has more than %d sources, or ord %d twice; a compaction gives a summary at most %d", v.SummaryID, policy.MaxCondenseGroupSize, v.Ord, policy.MaxCondenseGroupSize)
	case v.ChildID == nil && (parent.Depth != 0 || sess == nil || *v.ToSeq > sess.MessageCount+1):
		return fmt.Sprintf("a range source belongs to a summary of depth 0 and lies within its session's messages (summary %s)", v.SummaryID)
	case v.ChildID != nil:
		child := summaries[*v.ChildID]
		if child == nil || child.SessionID != parent.SessionID || child.Depth != parent.Depth-1 || child.ParentID == nil || *child.ParentID != parent.ID {
			return fmt.Sprintf("child %s of summary %s is not a summary of the import one depth lower in the same session with it as parent", *v.ChildID, v.SummaryID)
		}
	}
	return ""
}

// checkTurns adds an error naming the message that takes a turn of a
// session past a limit.
func (c checker) checkTurns(bySession map[string][]record, at func(line int) checker) {
	lim := c.policy.Conversation.Limits
	if lim.MaxTurnMessages <= 0 && lim.MaxTurnTokens <= 0 {
		return
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
