package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
)

// withMaxResponseBytes sets the store's byte cap on answers.
func withMaxResponseBytes(n int) fixtureOption {
	return func(s *fixtureSettings) { s.cfg.MaxResponseBytes = n }
}

// longTurnContent is a message of about 2 KB whose JSON is larger still
// (< and > are escaped as \u003c and \u003e).
func longTurnContent(i int) string {
	return fmt.Sprintf("step %d: ", i) + strings.Repeat("<tool output> ", 150)
}

// seedLongTurn appends one user message and then n assistant messages in
// appends of 50 (each under the per-request limit), as issue 26 did.
func (f *fixture) seedLongTurn(owner, session string, n int) {
	f.t.Helper()
	f.newSession(owner, session)
	f.appendTurn(owner, session, TurnMessage{Role: RoleUser, Content: "Run the whole migration and report every step."})
	for done := 0; done < n; done += 50 {
		turn := make([]TurnMessage, min(50, n-done))
		for i := range turn {
			turn[i] = TurnMessage{Role: RoleAssistant, Content: longTurnContent(done + i)}
		}
		f.appendTurn(owner, session, turn...)
	}
}

// checkSeqRange fails unless the truncation names [from, to).
func checkSeqRange(t *testing.T, what string, tr Truncation, from, to int64) {
	t.Helper()
	if !tr.Truncated || tr.OmittedFrom != from || tr.OmittedTo != to || int64(tr.Omitted) != to-from {
		t.Errorf("%s: truncation %+v, want [%d, %d)", what, tr, from, to)
	}
}

// TestAnswersBoundedByByteCap: with a byte cap of 64 KiB, every answer
// carrying conversation text or context stays within it whatever its
// budget, says it was truncated, and names the seq range it left out; the
// message list reads that range back page by page, each page within the
// cap, until every message was read exactly once.
func TestAnswersBoundedByByteCap(t *testing.T) {
	const capBytes = MinMaxResponseBytes
	f := newFixture(t, withMaxResponseBytes(capBytes))
	c := ctx(t)
	f.seedLongTurn("ann", "s", 300) // 301 messages, ~700 KB of JSON
	within := func(what string, v any) {
		t.Helper()
		if n := core.JSONSize(v); n > capBytes {
			t.Fatalf("%s: %d bytes, over the cap of %d", what, n, capBytes)
		}
	}

	w, err := f.store.Window(c, WindowRequest{Owner: "ann", SessionID: "s", Strategy: WindowToken, Budget: MaxWindowBudget})
	if err != nil {
		t.Fatal(err)
	}
	within("window", w)
	first := w.Items[0].Message.Seq
	checkSeqRange(t, "window", w.Truncation, 1, first)
	if last := w.Items[len(w.Items)-1].Message.Seq; last != 301 || len(w.Items) != int(301-first+1) {
		t.Errorf("window holds %d..%d in %d items, want the newest messages", first, last, len(w.Items))
	}

	// The message list from the start: a page within the cap, then the
	// rest through the omitted ranges.
	seen := int64(0)
	for from, pages := int64(1), 0; from != 0; pages++ {
		page, err := f.store.Messages(c, MessagesRequest{Owner: "ann", SessionID: "s", From: from})
		if err != nil {
			t.Fatal(err)
		}
		within("message page", page)
		if len(page.Items) == 0 || page.Items[0].Seq != from {
			t.Fatalf("page from %d starts at %v", from, seqsOf(page.Items))
		}
		seen += int64(len(page.Items))
		from = 0
		if page.Truncated {
			checkSeqRange(t, "message page", page.Truncation, page.Items[len(page.Items)-1].Seq+1, 302)
			from = page.OmittedFrom
		}
		if pages > 301 {
			t.Fatal("the message list does not progress")
		}
	}
	if seen != 301 {
		t.Fatalf("read %d messages through the pages, want 301", seen)
	}
	last, err := f.store.Messages(c, MessagesRequest{Owner: "ann", SessionID: "s", Last: 300})
	if err != nil {
		t.Fatal(err)
	}
	within("last 300", last)
	checkSeqRange(t, "last 300", last.Truncation, 2, last.Items[0].Seq)
	if last.Items[len(last.Items)-1].Seq != 301 {
		t.Errorf("last 300 ends at %d", last.Items[len(last.Items)-1].Seq)
	}

	res, err := f.store.CompactSession(c, CompactSessionRequest{Owner: "ann", SessionID: "s", Mode: CompactFull, Force: true})
	if err != nil || len(res.Roots) == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	root := res.Roots[0]
	e, err := f.store.ExpandSummary(c, ExpandRequest{Owner: "ann", ID: root.ID, MaxTokens: MaxExpandTokens})
	if err != nil {
		t.Fatal(err)
	}
	within("expansion", e)
	if len(e.Messages) == 0 || e.Messages[0].Seq != root.EarliestSeq {
		t.Fatalf("expansion starts at %v, want %d", seqsOf(e.Messages), root.EarliestSeq)
	}
	checkSeqRange(t, "expansion", e.Truncation, e.Messages[len(e.Messages)-1].Seq+1, root.LatestSeq+1)

	// A caller's lower cap (the MCP tools') holds too.
	hits, err := f.store.SearchHistory(c, HistorySearchRequest{Owner: "ann", Query: "tool output step", MaxBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := core.JSONSize(hits); n > 8<<10 || !hits.Truncated || hits.Omitted == 0 || len(hits.Results)+hits.Omitted != MaxHistoryResults {
		t.Errorf("history search of %d bytes: %d results, truncated %v, %d omitted", n, len(hits.Results), hits.Truncated, hits.Omitted)
	}
	small, err := f.store.Window(c, WindowRequest{Owner: "ann", SessionID: "s", Strategy: WindowToken, Budget: MaxWindowBudget, MaxBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := core.JSONSize(small); n > 8<<10 || !small.Truncated {
		t.Errorf("window with a cap of 8 KiB: %d bytes, truncated %v", n, small.Truncated)
	}
}

// TestContextBoundedByByteCap: a context whose budget would hold more
// text than the byte cap allows stops at the cap, counts the memories it
// left out and says it was truncated.
func TestContextBoundedByByteCap(t *testing.T) {
	f := newFixture(t)
	for i := range 60 {
		f.add(AddRequest{Owner: "cy", Category: "project", Content: fmt.Sprintf("Release step %d uses tool%d & server%d & region%d & team%d & queue%d & owner%d", i, i, i, i, i, i, i)})
	}
	const capBytes = 4 << 10
	res, err := f.store.Context(ctx(t), ContextRequest{Owner: "cy", MaxTokens: 32000, MaxBytes: capBytes})
	if err != nil {
		t.Fatal(err)
	}
	if n := core.JSONSize(res); n > capBytes || !res.Truncated || res.Omitted == 0 || len(res.IDs) == 0 {
		t.Fatalf("context of %d bytes (cap %d): %d ids, %d omitted, truncated %v", n, capBytes, len(res.IDs), res.Omitted, res.Truncated)
	}
	if res.Tokens > 32000 {
		t.Errorf("context of %d tokens", res.Tokens)
	}
	full, err := f.store.Context(ctx(t), ContextRequest{Owner: "cy", MaxTokens: 32000})
	if err != nil || full.Truncated || len(full.IDs) != 60 {
		t.Fatalf("context within the default cap: %d ids, truncated %v, %v", len(full.IDs), full.Truncated, err)
	}
}

func seqsOf(msgs []ConversationMessage) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}
