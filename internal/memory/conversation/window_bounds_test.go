package memory

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
)

// The bounds of a window (issue 26): a fresh tail over the budget is cut
// to its newest messages that fit, the byte cap holds whatever the
// messages hold, and the window names what it left out.

// shifted is conv with seqs starting at first (a suffix the Store loaded).
func shifted(pattern string, tokens int, first int64) []ConversationMessage {
	msgs := conv(pattern, tokens)
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
		p               windowParams
		msgs            []ConversationMessage
		pre             windowLoad
		want            string
		from, to        int64 // the omitted range, 0 = not truncated
		overBudgetByOne bool
	}{
		{"a turn longer than the budget keeps its newest messages", windowParams{WindowToken, 55, 5, 20, 0},
			conv("u"+strings.Repeat("a", 20), 10), windowLoad{}, "17,18,19,20,21", 1, 17, false},
		{"a turn start among what fits leads", windowParams{WindowToken, 45, 5, 20, 0},
			conv("uaaauaa", 10), windowLoad{}, "5,6,7", 1, 5, false},
		{"a tool result does not lead when its call fits", windowParams{WindowToken, 45, 2, 20, 0},
			conv("uatatata", 10), windowLoad{}, "6,7,8", 1, 6, false},
		{"only tool results fit", windowParams{WindowToken, 25, 2, 20, 0},
			conv("uatt", 10), windowLoad{}, "3,4", 1, 3, false},
		{"the newest message alone when none fits", windowParams{WindowToken, 5, 1, 20, 0},
			conv("ua", 10), windowLoad{}, "2", 1, 2, true},
		{"a tail of one message over the budget loses nothing", windowParams{WindowToken, 5, 1, 20, 0},
			conv("uau", 10), windowLoad{}, "3", 0, 0, true},
		{"buffer strategy cuts the same way", windowParams{WindowBuffer, 35, 3, 10, 0},
			conv("uaaaaa", 10), windowLoad{}, "4,5,6", 1, 4, false},
		{"summary strategy gives no summary beside a cut tail", windowParams{WindowSummary, 35, 3, 10, 0},
			conv("uaaaaa", 10), windowLoad{}, "4,5,6", 1, 4, false},
		{"the tail starts before the loaded messages", windowParams{WindowToken, 25, 5, 20, 0},
			shifted("aaaa", 10, 97), windowLoad{TailSeq: 1, TailTokens: 960}, "99,100", 1, 99, false},
		{"the reproduction: one user message and 3,000 assistant messages, budget 1", windowParams{WindowToken, 1, 5, 20, 0},
			shifted(strings.Repeat("a", 64), 500, 2938), windowLoad{TailSeq: 1, TailTokens: 2937 * 500}, "3001", 1, 3001, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := assembleWindow(tc.p, tc.msgs, nil, tc.msgs[len(tc.msgs)-1].Seq, tc.pre)
			if got := windowShape(w); got != tc.want {
				t.Errorf("window %q, want %q", got, tc.want)
			}
			if !w.FreshTailOverBudget {
				t.Error("FreshTailOverBudget is false")
			}
			want := Truncation{}
			want.Omit(tc.from, tc.to)
			if w.Truncation != want {
				t.Errorf("truncation %+v, want %+v", w.Truncation, want)
			}
			if over := w.Tokens > tc.p.Budget; over != tc.overBudgetByOne {
				t.Errorf("%d tokens for a budget of %d", w.Tokens, tc.p.Budget)
			}
			if tc.pre.TailSeq == 0 {
				checkWindowRules(t, tc.p, tc.msgs, w)
			}
		})
	}
}

// windowBytes is the cap that holds the window's envelope and n items of
// size item bytes each, and not one more.
func windowBytes(item, n int) int {
	return core.JSONSize(&Window{Strategy: WindowSummary, Budget: 100000, Items: []WindowItem{}}) + core.EnvelopeSlack + n*(item+1) + item/2
}

// TestWindowBoundedByByteCap: whatever the budget, a window's JSON stays
// within the byte cap: the oldest items go first, the message part then
// starts as after a budget cut, and the window names what it left out.
func TestWindowBoundedByByteCap(t *testing.T) {
	big := func(pattern string) []ConversationMessage {
		msgs := conv(pattern, 10)
		for i := range msgs {
			msgs[i].Content = strings.Repeat("<", 2000) // 6 bytes each in JSON
		}
		return msgs
	}
	item := core.JSONSize(WindowItem{Kind: KindMessage, Message: &big("u")[0]})
	roots := []Summary{{ID: "A", EarliestSeq: 1, LatestSeq: 4, Tokens: 10, Content: strings.Repeat("x", 20000)}}
	for _, tc := range []struct {
		name     string
		p        windowParams
		msgs     []ConversationMessage
		roots    []Summary
		want     string
		from, to int64
	}{
		{"the newest messages that fit", windowParams{WindowToken, 100000, 2, 20, windowBytes(item, 2)},
			big("uauaua"), nil, "5,6", 1, 5},
		{"a cut inside a turn moves to its turn start", windowParams{WindowToken, 100000, 2, 20, windowBytes(item, 3)},
			big("uauaua"), nil, "5,6", 1, 5},
		{"a turn longer than the cap keeps its newest messages", windowParams{WindowToken, 100000, 2, 20, windowBytes(item, 2)},
			big("uaaaa"), nil, "4,5", 1, 4},
		{"the fresh tail fits; older messages go", windowParams{WindowBuffer, 100000, 2, 6, windowBytes(item, 4)},
			big("uauaua"), nil, "3,4,5,6", 1, 3},
		{"summaries go before messages", windowParams{WindowSummary, 100000, 2, 20, windowBytes(item, 2)},
			big("uauaua"), roots, "5,6", 1, 5},
		{"a newest message over the cap: nothing", windowParams{WindowToken, 100000, 1, 20, windowBytes(item, 0)},
			big("ua"), nil, "", 1, 3},
		{"everything fits", windowParams{WindowToken, 100000, 2, 20, windowBytes(item, 6)},
			big("uauaua"), nil, "1,2,3,4,5,6", 0, 0},
		{"messages loaded without content are named, never given", windowParams{WindowToken, 100000, 2, 20, windowBytes(item, 6)},
			stubbed(big("uauaua"), 2), nil, "3,4,5,6", 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := assembleWindow(tc.p, tc.msgs, tc.roots, int64(len(tc.msgs)), windowLoad{Stubs: stubCount(tc.msgs)})
			if got := windowShape(w); got != tc.want {
				t.Errorf("window %q, want %q", got, tc.want)
			}
			want := Truncation{}
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
			for _, st := range []WindowStrategy{WindowBuffer, WindowToken, WindowSummary} {
				p := windowParams{Strategy: st, Budget: 1000, FreshTail: 2, BufferSize: 5, MaxBytes: windowBytes(item, n)}
				msgs := big(pat)
				checkWindowRules(t, p, msgs, assembleWindow(p, msgs, roots, int64(len(msgs)), windowLoad{}))
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
	if windowNeedsMore(windowParams{WindowToken, 1, 5, 20, 0}, long, nil) {
		t.Error("a loaded part over the budget asks for more")
	}
	small := shifted(strings.Repeat("a", 64), 1, 2938)
	for i := range small {
		small[i].Content = strings.Repeat("x", 100)
	}
	if !windowNeedsMore(windowParams{WindowToken, 100000, 5, 20, 1000}, small, nil) {
		t.Error("a loaded part over the byte cap, within the budget and without its turn start, does not ask for more")
	}
}

// stubbed empties the content of the first n messages, as the Store loads
// them past the byte cap.
func stubbed(msgs []ConversationMessage, n int) []ConversationMessage {
	for i := range n {
		msgs[i].Content = ""
	}
	return msgs
}

// stubCount counts the leading messages without content.
func stubCount(msgs []ConversationMessage) int {
	n := 0
	for n < len(msgs) && msgs[n].Content == "" {
		n++
	}
	return n
}
