package memory

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
)

// conv builds a chronological session from a role pattern: u=user,
// a=assistant, t=tool, s=system; each message has the given tokens.
func conv(pattern string, tokens int) []ConversationMessage {
	roles := map[rune]Role{'u': RoleUser, 'a': RoleAssistant, 't': RoleTool, 's': RoleSystem}
	out := make([]ConversationMessage, 0, len(pattern))
	for i, r := range pattern {
		out = append(out, ConversationMessage{Seq: int64(i + 1), Role: roles[r], Content: fmt.Sprint(i + 1), Tokens: tokens})
	}
	return out
}

// seqs lists a window's message seqs and summary ids in order.
func windowShape(w *Window) string {
	var parts []string
	for _, it := range w.Items {
		if it.Kind == KindSummary {
			parts = append(parts, "S"+it.Summary.ID)
		} else {
			parts = append(parts, fmt.Sprint(it.Message.Seq))
		}
	}
	return strings.Join(parts, ",")
}

// checkWindowRules checks what every window must satisfy.
func checkWindowRules(t *testing.T, p windowParams, msgs []ConversationMessage, w *Window) {
	t.Helper()
	tokens, first, cut := 0, true, w.FreshTailOverBudget || w.Truncated
	var lastSeq, firstSeq int64
	var given []ConversationMessage
	for _, it := range w.Items {
		if it.Kind == KindSummary {
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
			if !cut && !isTurnStart(*m) {
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
	f := freshStart(msgs, p.FreshTail)
	if over := suffixTokens(msgs)[f] > p.Budget; over != w.FreshTailOverBudget {
		t.Errorf("FreshTailOverBudget = %v, the tail's %d tokens against a budget of %d", w.FreshTailOverBudget, suffixTokens(msgs)[f], p.Budget)
	}
	if !cut {
		for i := f; i < len(msgs); i++ {
			if !slices.ContainsFunc(given, func(m ConversationMessage) bool { return m.Seq == msgs[i].Seq && m.Content == msgs[i].Content }) {
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
			t.Errorf("a cut fresh tail is not the session's newest messages: %s", windowShape(w))
		}
		start := len(msgs) - len(given)
		if !isTurnStart(given[0]) && slices.ContainsFunc(msgs[start:], isTurnStart) {
			t.Errorf("cut window starts on a %s message with a turn start in it: %s", given[0].Role, windowShape(w))
		}
	}
	checkTruncation(t, w.Truncation, firstSeq, msgs)
}

// checkTruncation checks that what a window says it left out is a seq
// range ending where the message part begins.
func checkTruncation(t *testing.T, tr Truncation, firstSeq int64, msgs []ConversationMessage) {
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

func TestAssembleWindow(t *testing.T) {
	roots := []Summary{
		{ID: "A", Depth: 1, EarliestSeq: 1, LatestSeq: 8, Tokens: 30},
		{ID: "B", Depth: 0, EarliestSeq: 9, LatestSeq: 12, Tokens: 20},
	}
	for _, tc := range []struct {
		name    string
		p       windowParams
		pattern string
		tokens  int
		roots   []Summary
		want    string
		over    bool
		dropped int
	}{
		{"buffer last N", windowParams{WindowBuffer, 1000, 2, 4, 0}, "uauauaua", 10, nil, "5,6,7,8", false, 4},
		{"buffer drops a leading assistant", windowParams{WindowBuffer, 1000, 2, 3, 0}, "uauauaua", 10, nil, "7,8", false, 6},
		{"fresh tail holds whole turns", windowParams{WindowBuffer, 1000, 2, 3, 0}, "uuatau", 10, nil, "2,3,4,5,6", false, 1},
		{"buffer never splits a tool result from its call", windowParams{WindowBuffer, 1000, 1, 5, 0}, "uuatauua", 10, nil, "6,7,8", false, 5},
		{"buffer within budget", windowParams{WindowBuffer, 35, 2, 8, 0}, "uauauaua", 10, nil, "7,8", false, 6},
		{"fresh tail extends back to its turn start", windowParams{WindowBuffer, 1000, 2, 1, 0}, "uatata", 10, nil, "1,2,3,4,5,6", false, 0},
		{"fresh tail over budget keeps its newest messages", windowParams{WindowToken, 15, 2, 20, 0}, "uauaua", 10, nil, "6", true, 5},
		{"token newest within budget", windowParams{WindowToken, 45, 2, 20, 0}, "uauauaua", 10, nil, "5,6,7,8", false, 4},
		{"token cut inside a turn moves forward", windowParams{WindowToken, 45, 1, 20, 0}, "uatauatau", 10, nil, "9", false, 8},
		{"token whole turns within budget", windowParams{WindowToken, 55, 1, 20, 0}, "uatauatau", 10, nil, "5,6,7,8,9", false, 4},
		{"token everything fits", windowParams{WindowToken, 1000, 5, 20, 0}, "suaua", 10, nil, "1,2,3,4,5", false, 0},
		{"session starting with an assistant", windowParams{WindowToken, 1000, 5, 20, 0}, "aua", 10, nil, "2,3", false, 1},
		{"no turn start at all", windowParams{WindowToken, 1000, 5, 20, 0}, "aaa", 10, nil, "", false, 3},
		{"empty session", windowParams{WindowSummary, 100, 5, 20, 0}, "", 10, nil, "", false, 0},
		{"summary: roots then uncovered messages", windowParams{WindowSummary, 1000, 2, 20, 0}, "uauauauauauauaua", 10, roots, "SA,SB,13,14,15,16", false, 12},
		{"summary: budget drops the oldest root first", windowParams{WindowSummary, 65, 2, 20, 0}, "uauauauauauauaua", 10, roots, "SB,13,14,15,16", false, 12},
		{"summary: budget drops middle messages", windowParams{WindowSummary, 75, 2, 20, 0}, "uauauauauauauaua", 10, roots, "SA,SB,15,16", false, 14},
		{"summary: a root overlapping the fresh tail is left out", windowParams{WindowSummary, 1000, 4, 20, 0}, "uauauauauaua", 10, roots, "SA,9,10,11,12", false, 8},
		{"summary: tail over budget, no summaries", windowParams{WindowSummary, 15, 2, 20, 0}, "uauauauauauauaua", 10, roots, "16", true, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := conv(tc.pattern, tc.tokens)
			w := assembleWindow(tc.p, msgs, tc.roots, int64(len(msgs)), windowLoad{})
			if got := windowShape(w); got != tc.want {
				t.Errorf("window %q, want %q", got, tc.want)
			}
			if w.FreshTailOverBudget != tc.over {
				t.Errorf("FreshTailOverBudget = %v, want %v", w.FreshTailOverBudget, tc.over)
			}
			if w.Dropped != tc.dropped {
				t.Errorf("Dropped = %d, want %d", w.Dropped, tc.dropped)
			}
			checkWindowRules(t, tc.p, msgs, w)
		})
	}
}

// TestAssembleWindowProperties runs every strategy over many generated
// sessions and checks the rules that hold for all of them.
func TestAssembleWindowProperties(t *testing.T) {
	patterns := []string{"u", "ua", "uatatau", "suauauatau", "auauau", "uuuuuuuuuu", "uatatatatatatatau", "ttua", "sa"}
	for _, pat := range patterns {
		for _, budget := range []int{1, 10, 25, 60, 1000} {
			for _, tail := range []int{1, 2, 5} {
				for _, st := range []WindowStrategy{WindowBuffer, WindowToken, WindowSummary} {
					p := windowParams{Strategy: st, Budget: budget, FreshTail: tail, BufferSize: 3}
					msgs := conv(strings.Repeat(pat, 3), 7)
					roots := []Summary{{ID: "R", EarliestSeq: 1, LatestSeq: int64(len(pat)), Tokens: 9}}
					w := assembleWindow(p, msgs, roots, int64(len(msgs)), windowLoad{})
					checkWindowRules(t, p, msgs, w)
				}
			}
		}
	}
}

func TestWindowNeedsMore(t *testing.T) {
	full := conv("uauauauauauauauauaua", 10) // seq 1..20
	for _, tc := range []struct {
		name  string
		p     windowParams
		from  int // msgs = full[from:]
		roots []Summary
		want  bool
	}{
		{"reached the start", windowParams{WindowToken, 1000, 2, 20, 0}, 0, nil, false},
		{"token: loaded rows within budget", windowParams{WindowToken, 1000, 2, 20, 0}, 10, nil, true},
		{"token: loaded rows beyond budget", windowParams{WindowToken, 50, 2, 20, 0}, 10, nil, false},
		{"buffer: fewer than N", windowParams{WindowBuffer, 1000, 2, 15, 0}, 10, nil, true},
		{"buffer: N loaded", windowParams{WindowBuffer, 1000, 2, 5, 0}, 10, nil, false},
		{"fresh tail longer than loaded", windowParams{WindowBuffer, 1000, 15, 5, 0}, 10, nil, true},
		{"fresh tail without its turn start", windowParams{WindowBuffer, 1000, 1, 1, 0}, 19, nil, true},
		{"summary: reached the coverage", windowParams{WindowSummary, 1000, 2, 20, 0}, 12, []Summary{{LatestSeq: 12}}, false},
		{"summary: short of the coverage", windowParams{WindowSummary, 1000, 2, 20, 0}, 14, []Summary{{LatestSeq: 12}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := windowNeedsMore(tc.p, full[tc.from:], tc.roots); got != tc.want {
				t.Errorf("windowNeedsMore = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestChunkRanges(t *testing.T) {
	msgs := conv("uauatauauauaua", 1) // seq 1..14, tool at 5
	for _, tc := range []struct {
		name    string
		end     int64
		size    int
		partial bool
		want    [][2]int64
	}{
		{"chunks end before a turn start", 15, 4, false, [][2]int64{{1, 7}, {7, 11}, {11, 15}}},
		{"a short last chunk waits", 15, 5, false, [][2]int64{{1, 7}, {7, 13}}},
		{"partial adds the short last chunk", 15, 5, true, [][2]int64{{1, 7}, {7, 13}, {13, 15}}},
		{"the range must reach the end", 14, 5, true, [][2]int64{{1, 7}, {7, 13}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := chunkRanges(msgs, tc.end, tc.size, tc.partial)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("chunks %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCondenseGroups(t *testing.T) {
	mk := func(depths ...int) []Summary {
		out := make([]Summary, len(depths))
		for i, d := range depths {
			out[i] = Summary{ID: fmt.Sprint(i), Depth: d}
		}
		return out
	}
	shape := func(gs [][]Summary) string {
		var parts []string
		for _, g := range gs {
			var ids []string
			for _, y := range g {
				ids = append(ids, y.ID)
			}
			parts = append(parts, strings.Join(ids, "+"))
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct {
		name    string
		roots   []Summary
		size    int
		max     int
		partial bool
		want    string
	}{
		{"full groups only", mk(0, 0, 0, 0, 0), 2, 4, false, "0+1 2+3"},
		{"partial groups of two or more", mk(0, 0, 0, 0, 0), 3, 4, true, "0+1+2 3+4"},
		{"runs of one depth only", mk(1, 1, 0, 0, 1), 2, 4, false, "0+1 2+3"},
		{"max depth is not condensed", mk(2, 2, 1, 1), 2, 2, false, "2+3"},
		{"a single leftover stays", mk(0, 0, 0), 2, 4, true, "0+1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shape(condenseGroups(tc.roots, tc.size, tc.max, tc.partial)); got != tc.want {
				t.Errorf("groups %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExtractiveSummary(t *testing.T) {
	lines := []string{"USER: I live in Lisbon. I like cats.", "ASSISTANT: " + strings.Repeat("word ", 400), "USER: 我住在东京。我喜欢猫。"}
	a, b := extractiveSummary(lines, 60), extractiveSummary(lines, 60)
	if a != b {
		t.Fatal("extractive summary is not deterministic")
	}
	if n := CountTokens(a); n > 60+CountTokens(lines[2]) {
		t.Errorf("summary of %d tokens for a target of 60: %q", n, a)
	}
	if !strings.Contains(a, "USER: I live in Lisbon.") || strings.Contains(a, "cats") {
		t.Errorf("summary does not keep first sentences: %q", a)
	}
	if !strings.Contains(a, "我住在东京。") {
		t.Errorf("summary lost the CJK sentence: %q", a)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 100) + "the needle is here " + strings.Repeat("dolor sit ", 100)
	s := snippet(long, "needle")
	if n := len([]rune(s)); n > MaxSnippetChars {
		t.Errorf("snippet of %d characters", n)
	}
	if !strings.Contains(s, "needle") {
		t.Errorf("snippet misses the query word: %q", s)
	}
	if short := "short text"; snippet(short, "x") != short {
		t.Error("a short text is its own snippet")
	}
	cjk := strings.Repeat("猫", 800)
	if n := len([]rune(snippet(cjk, "猫猫猫"))); n > MaxSnippetChars {
		t.Errorf("CJK snippet of %d characters", n)
	}
}
