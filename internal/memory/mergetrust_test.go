package memory

import (
	"net/http"
	"strings"
	"testing"
)

// Two sentences in the arbitration band [0.85, 0.95) of the builtin
// embedder (TestArbitration checks the band).
const (
	bandExisting = "Alice drinks her coffee black every single morning before work at the office"
	bandIncoming = "Alice drinks her coffee black every single morning before work at home"
)

// mergeHistory is the history row of a merge of memory id.
func (f *fixture) mergeHistory(owner, id, action string) HistoryEntry {
	f.t.Helper()
	hist, err := f.store.History(ctx(f.t), owner, id)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, h := range hist {
		if h.Action == action {
			return h
		}
	}
	f.t.Fatalf("no %s in the history of %s: %+v", action, id, hist)
	return HistoryEntry{}
}

// TestMergesKeepTheLowestTrust: when the arbiter merges an agent's memory
// with a user's write (or the other way round), the merged row's source is
// agent, whoever wrote last; a user's write of a protected category is not
// merged into an agent's text (the two stay apart, the protected one as
// the user wrote it); the history of a merge records both sources.
func TestMergesKeepTheLowestTrust(t *testing.T) {
	merged := "Alice drinks black coffee every morning, at the office or at home"
	chat := newFakeChat(t, func(system, user string) (int, string) {
		return http.StatusOK, `{"action":"UPDATE","merged":"` + merged + `"}`
	})
	cases := []struct {
		name                string
		first, second       Source
		firstCat, secondCat string
		wantAction          Action
		wantSource          Source
		wantCategory        string
		wantRows            int64
	}{
		{"user write merged into an agent's memory", SourceAgent, SourceUser, "preference", "preference", ActionUpdated, SourceAgent, "preference", 1},
		{"agent write merged into a user's memory", SourceUser, SourceAgent, "preference", "preference", ActionUpdated, SourceAgent, "preference", 1},
		{"user writes merged", SourceUser, SourceUser, "preference", "health", ActionUpdated, SourceUser, "health", 1},
		{"a user's protected write is not merged into an agent's memory", SourceAgent, SourceUser, "preference", "health", ActionAdded, SourceUser, "health", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withLLM(chat.llm()), withPolicy(protectedHealth))
			old := f.add(AddRequest{Owner: "alice", Content: bandExisting, Category: tc.firstCat, Source: tc.first})
			r := f.add(AddRequest{Owner: "alice", Content: bandIncoming, Category: tc.secondCat, Source: tc.second})
			if r.Action != tc.wantAction || r.Memory.Source != tc.wantSource || r.Memory.Category != tc.wantCategory {
				t.Fatalf("%s %s/%s (arbiter %q), want %s %s/%s", r.Action, r.Memory.Source, r.Memory.Category, r.Arbiter,
					tc.wantAction, tc.wantSource, tc.wantCategory)
			}
			if n := f.count(`SELECT count(*) FROM %s WHERE active`); n != tc.wantRows {
				t.Fatalf("%d active rows, want %d", n, tc.wantRows)
			}
			if r.Action != ActionUpdated {
				kept, err := f.store.Get(ctx(t), "alice", old.Memory.ID)
				if err != nil || kept.Source != tc.first || kept.Content != bandExisting || !kept.Active {
					t.Fatalf("the agent's memory changed: %+v, %v", kept, err)
				}
				return
			}
			h := f.mergeHistory("alice", old.Memory.ID, "arbiter-update")
			if h.Actor != tc.second || h.Details["existingSource"] != string(tc.first) || h.Details["incomingSource"] != string(tc.second) {
				t.Fatalf("history actor %s details %v: want the writer as actor and both sources", h.Actor, h.Details)
			}
		})
	}
}

// TestBatchDedupMergeKeepsTheLowestTrust: a session extraction that runs
// as user (an app appended every message as user) and whose batch dedup
// merges a fact into an agent's memory stores the merged row as agent,
// and does not merge its protected fact into the agent's text.
func TestBatchDedupMergeKeepsTheLowestTrust(t *testing.T) {
	chat := newLTMChat(t, []sessionFact{
		{Content: "Alice has a heart condition and must not drink black coffee in the morning", Category: "health", Importance: 9},
		{Content: bandIncoming, Category: "preference", Importance: 5},
	})
	chat.decisions = func(n int) []map[string]any {
		out := []map[string]any{}
		for i := range n {
			out = append(out, map[string]any{"index": i, "action": "UPDATE", "merged": "Alice drinks black coffee every morning, wherever she is"})
		}
		return out
	}
	f := newFixture(t, withLLM(chat.llm()), withPolicy(func(p *Policy) { protectedHealth(p); wideBand(p) }))
	agentMem := f.add(AddRequest{Owner: "alice", Content: bandExisting, Category: "preference", Source: SourceAgent})
	f.newSession("alice", "s")
	f.appendAs("alice", "s", SourceUser, userTurn("I drink my coffee black every morning at home, though my heart doctor says not to."))

	res, err := f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "alice", SessionID: "s", Source: SourceUser})
	if err != nil {
		t.Fatal(err)
	}
	if res.EffectiveSource != SourceUser || len(res.Facts) != 2 {
		t.Fatalf("extraction %+v: want two facts as user", res)
	}
	health, pref := res.Facts[0].Result, res.Facts[1].Result
	if pref == nil || pref.Action != ActionUpdated || pref.Memory.ID != agentMem.Memory.ID || pref.Memory.Source != SourceAgent {
		t.Fatalf("preference fact %+v: want the agent's memory updated, source agent", res.Facts[1])
	}
	if health == nil || health.Memory.ID == agentMem.Memory.ID || health.Memory.Source != SourceUser || health.Memory.Category != "health" {
		t.Fatalf("health fact %+v: want its own memory, user/health", res.Facts[0])
	}
	if !strings.HasPrefix(health.Arbiter, "fallback: a protected memory is not merged") || health.Action != ActionAdded {
		t.Fatalf("health fact result %+v: want it added apart from the agent's text", health)
	}
	h := f.mergeHistory("alice", agentMem.Memory.ID, "arbiter-update")
	if h.Actor != SourceUser || h.Details["existingSource"] != "agent" || h.Details["incomingSource"] != "user" {
		t.Fatalf("history actor %s details %v: want both sources", h.Actor, h.Details)
	}
}
