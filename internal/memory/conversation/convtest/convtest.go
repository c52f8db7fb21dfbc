// Package convtest holds the checks and builders the tests of conversation
// memory share across packages (internal/memory/conversation's own tests
// and the façade's, which build windows from a database): the rules every
// window satisfies, and sessions built from a role pattern. Tests only.
package convtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/core"
)

// Conv builds a chronological session from a role pattern: u=user,
// a=assistant, t=tool, s=system; each message has the given tokens.
func Conv(pattern string, tokens int) []conversation.Message {
	roles := map[rune]conversation.Role{'u': conversation.RoleUser, 'a': conversation.RoleAssistant, 't': conversation.RoleTool, 's': conversation.RoleSystem}
	out := make([]conversation.Message, 0, len(pattern))
	for i, r := range pattern {
		out = append(out, conversation.Message{Seq: int64(i + 1), Role: roles[r], Content: fmt.Sprint(i + 1), Tokens: tokens})
	}
	return out
}

// WindowShape lists a window's message seqs and summary ids in order.
func WindowShape(w *conversation.Window) string {
	var parts []string
	for _, it := range w.Items {
		if it.Kind == conversation.KindSummary {
			parts = append(parts, "S"+it.Summary.ID)
		} else {
			parts = append(parts, fmt.Sprint(it.Message.Seq))
		}
	}
	return strings.Join(parts, ",")
}

// CheckWindowRules checks what every window must satisfy.
func CheckWindowRules(t testing.TB, p conversation.WindowParams, msgs []conversation.Message, w *conversation.Window) {
	t.Helper()
	tokens, first, cut := 0, true, w.FreshTailOverBudget || w.Truncated
	var lastSeq, firstSeq int64
	var given []conversation.Message
	for _, it := range w.Items {
		if it.Kind == conversation.KindSummary {
			tokens += it.Summary.Tokens
			if it.Summary.LatestSeq <= lastSeq {
				t.Errorf("summary %s out of order", it.Summary.ID)
			}
			lastSeq = it.Summary.LatestSeq
			continue
		}
		m := it.Message
		tokens += m.Tokens
		if first {
			firstSeq = m.Seq
			if !cut && !conversation.IsTurnStart(*m) {
				t.Errorf("window starts on a %s message (seq %d)", m.Role, m.Seq)
			}
		}
		if m.Seq <= lastSeq {
			t.Errorf("message %d out of order", m.Seq)
		}
		first, lastSeq = false, m.Seq
		given = append(given, *m)
	}
	if tokens != w.Tokens {
		t.Errorf("Tokens = %d, items sum to %d", w.Tokens, tokens)
	}
	f := conversation.FreshStart(msgs, p.FreshTail)
	if over := conversation.SuffixTokens(msgs)[f] > p.Budget; over != w.FreshTailOverBudget {
		t.Errorf("FreshTailOverBudget = %v, the tail's %d tokens against a budget of %d", w.FreshTailOverBudget, conversation.SuffixTokens(msgs)[f], p.Budget)
	}
	if !cut {
		for i := f; i < len(msgs); i++ {
			if !slices.ContainsFunc(given, func(m conversation.Message) bool { return m.Seq == msgs[i].Seq && m.Content == msgs[i].Content }) {
				t.Errorf("fresh tail message %d missing", msgs[i].Seq)
			}
		}
	}
	// At most one message over the budget: only a window of one message.
	if w.Tokens > p.Budget && len(w.Items) != 1 {
		t.Errorf("window of %d tokens in %d items exceeds the budget %d", w.Tokens, len(w.Items), p.Budget)
	}
	if p.MaxBytes > 0 {
		if n := core.JSONSize(w); n > p.MaxBytes {
			t.Errorf("window of %d bytes over the cap of %d", n, p.MaxBytes)
		}
	}
	if w.FreshTailOverBudget && len(given) > 0 {
		// Cut to the newest messages: a suffix of the session, on a turn
		// start when one was within reach.
		if given[len(given)-1].Seq != msgs[len(msgs)-1].Seq || len(w.Items) != len(given) {
			t.Errorf("a cut fresh tail is not the session's newest messages: %s", WindowShape(w))
		}
		start := len(msgs) - len(given)
		if !conversation.IsTurnStart(given[0]) && slices.ContainsFunc(msgs[start:], conversation.IsTurnStart) {
			t.Errorf("cut window starts on a %s message with a turn start in it: %s", given[0].Role, WindowShape(w))
		}
	}
	CheckTruncation(t, w.Truncation, firstSeq, msgs)
}

// CheckTruncation checks that what a window says it left out is a seq
// range ending where the message part begins.
func CheckTruncation(t testing.TB, tr conversation.Truncation, firstSeq int64, msgs []conversation.Message) {
	t.Helper()
	if !tr.Truncated {
		if tr.Omitted != 0 || tr.OmittedFrom != 0 || tr.OmittedTo != 0 {
			t.Errorf("not truncated but %+v", tr)
		}
		return
	}
	if tr.Omitted <= 0 || int64(tr.Omitted) != tr.OmittedTo-tr.OmittedFrom || tr.OmittedFrom < 1 {
		t.Errorf("truncation %+v is not a seq range", tr)
	}
	if firstSeq == 0 && len(msgs) > 0 {
		firstSeq = msgs[len(msgs)-1].Seq + 1
	}
	if firstSeq != 0 && tr.OmittedTo > firstSeq {
		t.Errorf("truncation %+v reaches into the messages given (from %d)", tr, firstSeq)
	}
}
