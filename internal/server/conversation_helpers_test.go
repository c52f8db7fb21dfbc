package server

import (
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// Helpers of the conversation tests: append, read and window a session
// through the API, and check a window against the messages it draws on.

func appendTurn(t *testing.T, srv *testServer, owner, id string, body any) memory.AppendResult {
	t.Helper()
	var res memory.AppendResult
	srv.do(t, req{method: "POST", path: sessPath(owner, id, "messages"), body: body}).want(t, 201).decode(t, &res)
	return res
}

// readAll reads every message of a session through the API.
func readAll(t *testing.T, srv *testServer, owner, id string) []memory.ConversationMessage {
	t.Helper()
	var page messagesResponse
	srv.do(t, req{method: "GET", path: sessPath(owner, id, "messages")}).want(t, 200).decode(t, &page)
	return page.Items
}

func window(t *testing.T, srv *testServer, owner, id string, body map[string]any) memory.Window {
	t.Helper()
	var w memory.Window
	srv.do(t, req{method: "POST", path: sessPath(owner, id, "window"), body: body}).want(t, 200).decode(t, &w)
	return w
}

func seqs(ms []memory.ConversationMessage) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func countMessages(w memory.Window) int {
	n := 0
	for _, it := range w.Items {
		if it.Kind == memory.KindMessage {
			n++
		}
	}
	return n
}

// checkWindow checks the rules every window keeps: chronological, the
// items' tokens summed, and either the fresh tail (the newest freshTail
// messages of all) verbatim at the end within the budget, never starting
// on an assistant or tool message; or, when the fresh tail alone is over
// the budget, the session's newest messages that fit (the newest alone
// when none does) with the messages cut named as a seq range.
func checkWindow(t *testing.T, w memory.Window, all []memory.ConversationMessage, budget, freshTail int) {
	t.Helper()
	if len(w.Items) == 0 {
		t.Fatalf("%s window is empty", w.Strategy)
	}
	var last int64
	var msgs []memory.ConversationMessage
	sum := 0
	for i, it := range w.Items {
		switch it.Kind {
		case memory.KindSummary:
			if it.Summary.EarliestSeq <= last {
				t.Fatalf("%s window: summary %d..%d after seq %d", w.Strategy, it.Summary.EarliestSeq, it.Summary.LatestSeq, last)
			}
			last = it.Summary.LatestSeq
			sum += it.Summary.Tokens
		case memory.KindMessage:
			m := it.Message
			if m.Seq <= last {
				t.Fatalf("%s window: seq %d after %d", w.Strategy, m.Seq, last)
			}
			if i == 0 && !w.FreshTailOverBudget && (m.Role == memory.RoleAssistant || m.Role == memory.RoleTool) {
				t.Fatalf("%s window starts on a %s message", w.Strategy, m.Role)
			}
			last = m.Seq
			sum += m.Tokens
			msgs = append(msgs, *m)
		default:
			t.Fatalf("%s window: item of kind %q", w.Strategy, it.Kind)
		}
	}
	if sum != w.Tokens {
		t.Errorf("%s window: items hold %d tokens, the window says %d", w.Strategy, sum, w.Tokens)
	}
	if w.Tokens > budget && len(w.Items) > 1 {
		t.Fatalf("%s window: %d tokens in %d items, over the budget of %d by more than one message", w.Strategy, w.Tokens, len(w.Items), budget)
	}
	if w.FreshTailOverBudget {
		newest := all[len(all)-len(msgs):]
		for i, m := range msgs {
			if m.Seq != newest[i].Seq || m.Content != newest[i].Content || len(msgs) != len(w.Items) {
				t.Fatalf("%s window over budget: message %d = seq %d, want the newest messages verbatim", w.Strategy, i, m.Seq)
			}
		}
		if w.Truncated && (w.OmittedTo != msgs[0].Seq || int64(w.Omitted) != w.OmittedTo-w.OmittedFrom || w.OmittedFrom < 1) {
			t.Fatalf("%s window over budget: truncation %+v does not end at seq %d", w.Strategy, w.Truncation, msgs[0].Seq)
		}
		return
	}
	tail := all[len(all)-freshTail:]
	if len(msgs) < freshTail {
		t.Fatalf("%s window: %d messages, fewer than the fresh tail of %d", w.Strategy, len(msgs), freshTail)
	}
	for i, m := range msgs[len(msgs)-freshTail:] {
		if m.Seq != tail[i].Seq || m.Content != tail[i].Content {
			t.Fatalf("%s window: fresh tail message %d = seq %d, want seq %d verbatim", w.Strategy, i, m.Seq, tail[i].Seq)
		}
	}
}
