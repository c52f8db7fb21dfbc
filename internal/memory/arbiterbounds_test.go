package memory

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
)

// bigMemoryChat scripts the fake model for TestBatchDedupRequestIsBounded:
// n facts from the extraction, ADD for every fact of the batch dedup and
// for the single add's arbiter.
func bigMemoryChat(t *testing.T, n int) *fakeChat {
	facts := make([]sessionFact, n)
	for k := range facts {
		// Near its memory, not identical: the arbitration band.
		facts[k] = sessionFact{Content: bigMemoryHead(k) + " gamma", Category: "contextual", Importance: 5}
	}
	// The last fact repeats the one before: past the batch's bound, the add
	// path must still merge it with the copy stored just before it.
	facts[n-1] = facts[n-2]
	return newFakeChat(t, func(system, user string) (int, string) {
		switch {
		case strings.Contains(system, "You extract durable facts"):
			b, _ := json.Marshal(map[string]any{"facts": facts})
			return http.StatusOK, string(b)
		case strings.Contains(system, "NEW facts"):
			var ds []map[string]any
			for i := range strings.Count(user, "EXISTING:") {
				ds = append(ds, map[string]any{"index": i, "action": "ADD"})
			}
			b, _ := json.Marshal(map[string]any{"decisions": ds})
			return http.StatusOK, string(b)
		}
		return http.StatusOK, `{"action": "ADD"}`
	})
}

func bigMemoryHead(k int) string {
	return fmt.Sprintf("memo %d topic%d alpha%d beta%d", k, k, k*7, k*13)
}

// TestBatchDedupRequestIsBounded (issue 26, twenty-second review, NEW 1
// and LOW 1): with maxContentBytes 65536 and maxFactsPerExtraction 100, an
// agent's 100 memories of 64 KiB of "<" made one session extraction send
// a batch dedup request of 37.5 MiB (each fact's nearest memory whole,
// each "<" escaped to six bytes), and each single add's arbiter request
// quoted both texts whole. Now every text is cut (core.ArbiterText), the
// batch's user message is bounded (facts past it are stored by the add
// path, said in their result), and nothing is escaped: the largest request
// the model server reads stays small, and every fact is still stored.
func TestBatchDedupRequestIsBounded(t *testing.T) {
	const n = 100
	const bound = 512 << 10
	chat := bigMemoryChat(t, n)
	f := newFixture(t, withLLM(chat.llm()), withPolicy(func(p *Policy) {
		wideBand(p)
		p.Limits.MaxContentBytes, p.Limits.MaxFactsPerExtraction, p.Limits.MaxMemoriesPerOwner = 65536, n, 1000
	}))
	filler := strings.Repeat("<", 65536-64)
	for k := range n {
		f.add(AddRequest{Owner: "eve", Content: bigMemoryHead(k) + " " + filler, Category: "contextual", Source: SourceAgent})
	}
	f.newSession("eve", "s1")
	f.appendTurn("eve", "s1", userTurn("I keep notes on memo topics alpha and beta."))
	res, err := f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "eve", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	arbiter, batch := 0, 0
	for _, body := range chat.sent() {
		switch {
		case strings.Contains(body, "NEW facts"):
			batch = max(batch, len(body))
		case strings.Contains(body, "You get an EXISTING memory"):
			arbiter = max(arbiter, len(body))
		}
		if len(body) > bound {
			t.Errorf("the model server read a request of %d bytes (%.1f MiB), want at most %d", len(body), float64(len(body))/(1<<20), bound)
		}
	}
	t.Logf("largest batch dedup request %d bytes, largest arbiter request %d bytes", batch, arbiter)
	if batch == 0 || arbiter == 0 {
		t.Fatalf("batch dedup request %d bytes, arbiter request %d bytes: want both asked", batch, arbiter)
	}
	if arbiter > 4*core.MaxArbiterTextBytes+2<<10 {
		t.Errorf("an arbiter request of %d bytes, want two cut texts and the prompt", arbiter)
	}
	checkFactsStored(t, f, res, n)
}

// checkFactsStored: every fact has a result, the ones past the batch's
// bound say so, some got the model's decision, and the last fact (a copy
// of the one before, past the bound) was merged with it, not stored twice.
func checkFactsStored(t *testing.T, f *fixture, res *SessionExtractResult, n int) {
	t.Helper()
	if len(res.Facts) != n {
		t.Fatalf("%d facts, want %d", len(res.Facts), n)
	}
	decided, full := 0, 0
	for i, fct := range res.Facts {
		switch {
		case fct.Result == nil:
			t.Fatalf("fact %d: no result (dropped %q)", i, fct.Dropped)
		case fct.Result.Arbiter == "llm":
			decided++
		case strings.Contains(fct.Result.Arbiter, "request was full"):
			full++
		}
	}
	t.Logf("%d facts decided by the model, %d past the bound of the batch", decided, full)
	if decided == 0 || full == 0 || decided+full != n-1 {
		t.Fatalf("%d facts decided by the model, %d past the bound; want both, %d in all", decided, full, n-1)
	}
	last, before := res.Facts[n-1].Result, res.Facts[n-2].Result
	if last.Action != ActionMerged || last.Memory.ID == "" || last.Memory.ID != before.Memory.ID {
		t.Fatalf("the repeated fact: %s into %q, want merged into the fact before it (%q)", last.Action, last.Memory.ID, before.Memory.ID)
	}
	if active, err := f.store.ActiveCount(ctx(t), "eve"); err != nil || active != int64(2*n-1) {
		t.Fatalf("%d active memories (%v), want %d: the 100 added and the facts, the repeat once", active, err, 2*n-1)
	}
}

// TestBatchDedupLeavesTheAutoMergeBandToTheAddPath: a fact near-identical
// to a memory (similarity at least autoMergeThreshold, not the same text)
// was sent to the batch dedup, whose decision the add path then ignored
// (it merges such a fact itself). It is no longer sent: no batch call.
func TestBatchDedupLeavesTheAutoMergeBandToTheAddPath(t *testing.T) {
	chat := newLTMChat(t, []sessionFact{{Content: "The user drinks green tea every morning!", Category: "preference", Importance: 5}})
	chat.decisions = func(n int) []map[string]any { return []map[string]any{{"index": 0, "action": "ADD"}} }
	f := newFixture(t, withLLM(chat.llm()))
	f.add(AddRequest{Owner: "alice", Content: "The user drinks green tea every morning", Category: "preference", Source: SourceUser})
	f.newSession("alice", "s1")
	f.appendTurn("alice", "s1", userTurn("I drink green tea every morning."))
	res, err := f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "alice", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Facts) != 1 || res.Facts[0].Result == nil || res.Facts[0].Result.Action != ActionMerged {
		t.Fatalf("facts %+v: want the fact merged into the memory", res.Facts)
	}
	if len(chat.dedupUser) != 0 || res.LLMCalls != 1 {
		t.Fatalf("%d batch dedup calls (%d LLM calls) for a fact the add path merges, want none", len(chat.dedupUser), res.LLMCalls)
	}
}
