package conversation_test

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/conversation/convtest"
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

// The bounds of a window (issue 26): a fresh tail over the budget is cut
// to its newest messages that fit, the byte cap holds whatever the
// messages hold, and the window names what it left out.

// shifted is conv with seqs starting at first (a suffix the Store loaded).
func shifted(pattern string, tokens int, first int64) []conversation.Message {
	msgs := convtest.Conv(pattern, tokens)
	for i := range msgs {
		msgs[i].Seq = first + int64(i)
	}
	return msgs
}

// TestWindowFreshTailBoundedByBudget: a fresh tail longer than the budget
// is cut to its newest messages that fit (on a turn start when one is
// among them, else on an assistant message), never more than one message
// over the budget, and the window says which messages it left out.
func TestWindowFreshTailBoundedByBudget(t *testing.T) {
	for _, tc := range []struct {
		name            string
		p               conversation.WindowParams
		msgs            []conversation.Message
		pre             conversation.WindowLoad
		want            string
		from, to        int64 // the omitted range, 0 = not truncated
		overBudgetByOne bool
	}{
		{"a turn longer than the budget keeps its newest messages", conversation.WindowParams{policy.WindowToken, 55, 5, 20, 0},
			convtest.Conv("u"+strings.Repeat("a", 20), 10), conversation.WindowLoad{}, "17,18,19,20,21", 1, 17, false},
		{"a turn start among what fits leads", conversation.WindowParams{policy.WindowToken, 45, 5, 20, 0},
			convtest.Conv("uaaauaa", 10), conversation.WindowLoad{}, "5,6,7", 1, 5, false},
		{"a tool result does not lead when its call fits", conversation.WindowParams{policy.WindowToken, 45, 2, 20, 0},
			convtest.Conv("uatatata", 10), conversation.WindowLoad{}, "6,7,8", 1, 6, false},
		{"only tool results fit", conversation.WindowParams{policy.WindowToken, 25, 2, 20, 0},
			convtest.Conv("uatt", 10), conversation.WindowLoad{}, "3,4", 1, 3, false},
		{"the newest message alone when none fits", conversation.WindowParams{policy.WindowToken, 5, 1, 20, 0},
			convtest.Conv("ua", 10), conversation.WindowLoad{}, "2", 1, 2, true},
		{"a tail of one message over the budget loses nothing", conversation.WindowParams{policy.WindowToken, 5, 1, 20, 0},
			convtest.Conv("uau", 10), conversation.WindowLoad{}, "3", 0, 0, true},
		{"buffer strategy cuts the same way", conversation.WindowParams{policy.WindowBuffer, 35, 3, 10, 0},
			convtest.Conv("uaaaaa", 10), conversation.WindowLoad{}, "4,5,6", 1, 4, false},
		{"summary strategy gives no summary beside a cut tail", conversation.WindowParams{policy.WindowSummary, 35, 3, 10, 0},
			convtest.Conv("uaaaaa", 10), conversation.WindowLoad{}, "4,5,6", 1, 4, false},
		{"the tail starts before the loaded messages", conversation.WindowParams{policy.WindowToken, 25, 5, 20, 0},
			shifted("aaaa", 10, 97), conversation.WindowLoad{TailSeq: 1, TailTokens: 960}, "99,100", 1, 99, false},
		{"the reproduction: one user message and 3,000 assistant messages, budget 1", conversation.WindowParams{policy.WindowToken, 1, 5, 20, 0},
			shifted(strings.Repeat("a", 64), 500, 2938), conversation.WindowLoad{TailSeq: 1, TailTokens: 2937 * 500}, "3001", 1, 3001, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := conversation.AssembleWindow(tc.p, tc.msgs, nil, tc.msgs[len(tc.msgs)-1].Seq, tc.pre)
			if got := convtest.WindowShape(w); got != tc.want {
				t.Errorf("window %q, want %q", got, tc.want)
			}
			if !w.FreshTailOverBudget {
				t.Error("FreshTailOverBudget is false")
			}
			want := conversation.Truncation{}
			want.Omit(tc.from, tc.to)
			if w.Truncation != want {
				t.Errorf("truncation %+v, want %+v", w.Truncation, want)
			}
			if over := w.Tokens > tc.p.Budget; over != tc.overBudgetByOne {
				t.Errorf("%d tokens for a budget of %d", w.Tokens, tc.p.Budget)
			}
			if tc.pre.TailSeq == 0 {
				convtest.CheckWindowRules(t, tc.p, tc.msgs, w)
			}
		})
	}
}

// windowBytes is the cap that holds the window's envelope and n items of
// size item bytes each, and not one more.
func windowBytes(item, n int) int {
	return core.JSONSize(&conversation.Window{Strategy: policy.WindowSummary, Budget: 100000, Items: []conversation.WindowItem{}}) + core.EnvelopeSlack + n*(item+1) + item/2
}

// TestWindowBoundedByByteCap: whatever the budget, a window's JSON stays
// within the byte cap: the oldest items go first, the message part then
// starts as after a budget cut, and the window names what it left out.
func TestWindowBoundedByByteCap(t *testing.T) {
	big := func(pattern string) []conversation.Message {
		msgs := convtest.Conv(pattern, 10)
		for i := range msgs {
			msgs[i].Content = strings.Repeat("<", 2000) // 6 bytes each in JSON
		}
		return msgs
	}
	item := core.JSONSize(conversation.WindowItem{Kind: conversation.KindMessage, Message: &big("u")[0]})
	roots := []conversation.Summary{{ID: "A", EarliestSeq: 1, LatestSeq: 4, Tokens: 10, Content: strings.Repeat("x", 20000)}}
	for _, tc := range []struct {
		name     string
		p        conversation.WindowParams
		msgs     []conversation.Message
		roots    []conversation.Summary
		want     string
		from, to int64
	}{
		{"the newest messages that fit", conversation.WindowParams{policy.WindowToken, 100000, 2, 20, windowBytes(item, 2)},
			big("uauaua"), nil, "5,6", 1, 5},
		{"a cut inside a turn moves to its turn start", conversation.WindowParams{policy.WindowToken, 100000, 2, 20, windowBytes(item, 3)},
			big("uauaua"), nil, "5,6", 1, 5},
		{"a turn longer than the cap keeps its newest messages", conversation.WindowParams{policy.WindowToken, 100000, 2, 20, windowBytes(item, 2)},
			big("uaaaa"), nil, "4,5", 1, 4},
		{"the fresh tail fits; older messages go", conversation.WindowParams{policy.WindowBuffer, 100000, 2, 6, windowBytes(item, 4)},
			big("uauaua"), nil, "3,4,5,6", 1, 3},
		{"summaries go before messages", conversation.WindowParams{policy.WindowSummary, 100000, 2, 20, windowBytes(item, 2)},
			big("uauaua"), roots, "5,6", 1, 5},
		{"a newest message over the cap: nothing", conversation.WindowParams{policy.WindowToken, 100000, 1, 20, windowBytes(item, 0)},
			big("ua"), nil, "", 1, 3},
		{"everything fits", conversation.WindowParams{policy.WindowToken, 100000, 2, 20, windowBytes(item, 6)},
			big("uauaua"), nil, "1,2,3,4,5,6", 0, 0},
		{"messages loaded without content are named, never given", conversation.WindowParams{policy.WindowToken, 100000, 2, 20, windowBytes(item, 6)},
			stubbed(big("uauaua"), 2), nil, "3,4,5,6", 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := conversation.AssembleWindow(tc.p, tc.msgs, tc.roots, int64(len(tc.msgs)), conversation.WindowLoad{Stubs: stubCount(tc.msgs)})
			if got := convtest.WindowShape(w); got != tc.want {
				t.Errorf("window %q, want %q", got, tc.want)
			}
			want := conversation.Truncation{}
			want.Omit(tc.from, tc.to)
			if w.Truncation != want {
				t.Errorf("truncation %+v, want %+v", w.Truncation, want)
			}
			if n := core.JSONSize(w); n > tc.p.MaxBytes {
				t.Errorf("window of %d bytes, cap %d", n, tc.p.MaxBytes)
			}
		})
	}
	// Every strategy, budget and cap: the rules hold.
	for _, pat := range []string{"uatatau", "uaaaaaaa", "suauauatau", "ttua"} {
		for _, n := range []int{0, 1, 2, 5} {
			for _, st := range []policy.WindowStrategy{policy.WindowBuffer, policy.WindowToken, policy.WindowSummary} {
				p := conversation.WindowParams{Strategy: st, Budget: 1000, FreshTail: 2, BufferSize: 5, MaxBytes: windowBytes(item, n)}
				msgs := big(pat)
				convtest.CheckWindowRules(t, p, msgs, conversation.AssembleWindow(p, msgs, roots, int64(len(msgs)), conversation.WindowLoad{}))
			}
		}
	}
}

// TestWindowNeedsMoreStopsAtTheBudget: the Store stops loading older
// pages once what it loaded is past the budget, even when the fresh tail's
// turn start lies further back (it is then found by a query), and loads on
// past the byte cap (without content) while the rules may use more.
func TestWindowNeedsMoreStopsAtTheBudget(t *testing.T) {
	long := shifted(strings.Repeat("a", 64), 500, 2938)
	if conversation.WindowNeedsMore(conversation.WindowParams{policy.WindowToken, 1, 5, 20, 0}, long, nil) {
		t.Error("a loaded part over the budget asks for more")
	}
	small := shifted(strings.Repeat("a", 64), 1, 2938)
	for i := range small {
		small[i].Content = strings.Repeat("x", 100)
	}
	if !conversation.WindowNeedsMore(conversation.WindowParams{policy.WindowToken, 100000, 5, 20, 1000}, small, nil) {
		t.Error("a loaded part over the byte cap, within the budget and without its turn start, does not ask for more")
	}
}

// stubbed empties the content of the first n messages, as the Store loads
// them past the byte cap.
func stubbed(msgs []conversation.Message, n int) []conversation.Message {
	for i := range n {
		msgs[i].Content = ""
	}
	return msgs
}

// stubCount counts the leading messages without content.
func stubCount(msgs []conversation.Message) int {
	n := 0
	for n < len(msgs) && msgs[n].Content == "" {
		n++
	}
	return n
}
