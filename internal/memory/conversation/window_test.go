package conversation_test

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/conversation/convtest"
	"github.com/engram-dev/engram/internal/memory/policy"
)

func TestAssembleWindow(t *testing.T) {
	roots := []conversation.Summary{
		{ID: "A", Depth: 1, EarliestSeq: 1, LatestSeq: 8, Tokens: 30},
		{ID: "B", Depth: 0, EarliestSeq: 9, LatestSeq: 12, Tokens: 20},
	}
	for _, tc := range []struct {
		name    string
		p       conversation.WindowParams
		pattern string
		tokens  int
		roots   []conversation.Summary
		want    string
		over    bool
		dropped int
	}{
		{"buffer last N", conversation.WindowParams{policy.WindowBuffer, 1000, 2, 4, 0}, "uauauaua", 10, nil, "5,6,7,8", false, 4},
		{"buffer drops a leading assistant", conversation.WindowParams{policy.WindowBuffer, 1000, 2, 3, 0}, "uauauaua", 10, nil, "7,8", false, 6},
		{"fresh tail holds whole turns", conversation.WindowParams{policy.WindowBuffer, 1000, 2, 3, 0}, "uuatau", 10, nil, "2,3,4,5,6", false, 1},
		{"buffer never splits a tool result from its call", conversation.WindowParams{policy.WindowBuffer, 1000, 1, 5, 0}, "uuatauua", 10, nil, "6,7,8", false, 5},
		{"buffer within budget", conversation.WindowParams{policy.WindowBuffer, 35, 2, 8, 0}, "uauauaua", 10, nil, "7,8", false, 6},
		{"fresh tail extends back to its turn start", conversation.WindowParams{policy.WindowBuffer, 1000, 2, 1, 0}, "uatata", 10, nil, "1,2,3,4,5,6", false, 0},
		{"fresh tail over budget keeps its newest messages", conversation.WindowParams{policy.WindowToken, 15, 2, 20, 0}, "uauaua", 10, nil, "6", true, 5},
		{"token newest within budget", conversation.WindowParams{policy.WindowToken, 45, 2, 20, 0}, "uauauaua", 10, nil, "5,6,7,8", false, 4},
		{"token cut inside a turn moves forward", conversation.WindowParams{policy.WindowToken, 45, 1, 20, 0}, "uatauatau", 10, nil, "9", false, 8},
		{"token whole turns within budget", conversation.WindowParams{policy.WindowToken, 55, 1, 20, 0}, "uatauatau", 10, nil, "5,6,7,8,9", false, 4},
		{"token everything fits", conversation.WindowParams{policy.WindowToken, 1000, 5, 20, 0}, "suaua", 10, nil, "1,2,3,4,5", false, 0},
		{"session starting with an assistant", conversation.WindowParams{policy.WindowToken, 1000, 5, 20, 0}, "aua", 10, nil, "2,3", false, 1},
		{"no turn start at all", conversation.WindowParams{policy.WindowToken, 1000, 5, 20, 0}, "aaa", 10, nil, "", false, 3},
		{"empty session", conversation.WindowParams{policy.WindowSummary, 100, 5, 20, 0}, "", 10, nil, "", false, 0},
		{"summary: roots then uncovered messages", conversation.WindowParams{policy.WindowSummary, 1000, 2, 20, 0}, "uauauauauauauaua", 10, roots, "SA,SB,13,14,15,16", false, 12},
		{"summary: budget drops the oldest root first", conversation.WindowParams{policy.WindowSummary, 65, 2, 20, 0}, "uauauauauauauaua", 10, roots, "SB,13,14,15,16", false, 12},
		{"summary: budget drops middle messages", conversation.WindowParams{policy.WindowSummary, 75, 2, 20, 0}, "uauauauauauauaua", 10, roots, "SA,SB,15,16", false, 14},
		{"summary: a root overlapping the fresh tail is left out", conversation.WindowParams{policy.WindowSummary, 1000, 4, 20, 0}, "uauauauauaua", 10, roots, "SA,9,10,11,12", false, 8},
		{"summary: tail over budget, no summaries", conversation.WindowParams{policy.WindowSummary, 15, 2, 20, 0}, "uauauauauauauaua", 10, roots, "16", true, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := convtest.Conv(tc.pattern, tc.tokens)
			w := conversation.AssembleWindow(tc.p, msgs, tc.roots, int64(len(msgs)), conversation.WindowLoad{})
			if got := convtest.WindowShape(w); got != tc.want {
				t.Errorf("window %q, want %q", got, tc.want)
			}
			if w.FreshTailOverBudget != tc.over {
				t.Errorf("FreshTailOverBudget = %v, want %v", w.FreshTailOverBudget, tc.over)
			}
			if w.Dropped != tc.dropped {
				t.Errorf("Dropped = %d, want %d", w.Dropped, tc.dropped)
			}
			convtest.CheckWindowRules(t, tc.p, msgs, w)
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
				for _, st := range []policy.WindowStrategy{policy.WindowBuffer, policy.WindowToken, policy.WindowSummary} {
					p := conversation.WindowParams{Strategy: st, Budget: budget, FreshTail: tail, BufferSize: 3}
					msgs := convtest.Conv(strings.Repeat(pat, 3), 7)
					roots := []conversation.Summary{{ID: "R", EarliestSeq: 1, LatestSeq: int64(len(pat)), Tokens: 9}}
					w := conversation.AssembleWindow(p, msgs, roots, int64(len(msgs)), conversation.WindowLoad{})
					convtest.CheckWindowRules(t, p, msgs, w)
				}
			}
		}
	}
}

func TestWindowNeedsMore(t *testing.T) {
	full := convtest.Conv("uauauauauauauauauaua", 10) // seq 1..20
	for _, tc := range []struct {
		name  string
		p     conversation.WindowParams
		from  int // msgs = full[from:]
		roots []conversation.Summary
		want  bool
	}{
		{"reached the start", conversation.WindowParams{policy.WindowToken, 1000, 2, 20, 0}, 0, nil, false},
		{"token: loaded rows within budget", conversation.WindowParams{policy.WindowToken, 1000, 2, 20, 0}, 10, nil, true},
		{"token: loaded rows beyond budget", conversation.WindowParams{policy.WindowToken, 50, 2, 20, 0}, 10, nil, false},
		{"buffer: fewer than N", conversation.WindowParams{policy.WindowBuffer, 1000, 2, 15, 0}, 10, nil, true},
		{"buffer: N loaded", conversation.WindowParams{policy.WindowBuffer, 1000, 2, 5, 0}, 10, nil, false},
		{"fresh tail longer than loaded", conversation.WindowParams{policy.WindowBuffer, 1000, 15, 5, 0}, 10, nil, true},
		{"fresh tail without its turn start", conversation.WindowParams{policy.WindowBuffer, 1000, 1, 1, 0}, 19, nil, true},
		{"summary: reached the coverage", conversation.WindowParams{policy.WindowSummary, 1000, 2, 20, 0}, 12, []conversation.Summary{{LatestSeq: 12}}, false},
		{"summary: short of the coverage", conversation.WindowParams{policy.WindowSummary, 1000, 2, 20, 0}, 14, []conversation.Summary{{LatestSeq: 12}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := conversation.WindowNeedsMore(tc.p, full[tc.from:], tc.roots); got != tc.want {
				t.Errorf("conversation.WindowNeedsMore = %v, want %v", got, tc.want)
			}
		})
	}
}
