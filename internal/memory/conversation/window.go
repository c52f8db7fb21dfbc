package conversation

import (
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

// Context windows as pure functions: the Store loads the rows a window can
// use (memory's Store.Window) and AssembleWindow decides what goes in, so every rule
// below is table-tested without a database.
//
// Rules common to every strategy:
//   - Items are in chronological order (summaries, then messages).
//   - The message part starts on a "turn start": a user or system message.
//     It never starts on an assistant or tool message, so a tool result is
//     never separated from the assistant message that called it. Where a cut
//     would fall inside a turn, the window drops the turn's leading
//     assistant/tool messages (it moves the cut forward to the next turn
//     start), which keeps it within budget. The one exception is a fresh
//     tail over the budget (below).
//   - The fresh tail — the newest FreshTail messages, its start moved BACK to
//     the turn start at or before it, so it holds whole turns — is kept
//     verbatim whenever it fits the budget. When no turn start precedes it
//     (a session that begins with assistant messages), it starts at the
//     first turn start after that point; a session without any user or
//     system message has no message part.
//   - A fresh tail over the budget (FreshTailOverBudget) is cut to its
//     newest messages that fit, and nothing older is added. The cut moves
//     forward to the first turn start among what fits, else to the first
//     assistant message among it (so a tool result never leads without the
//     call it answers when that call fits), else it stays: a single turn
//     longer than the budget keeps its newest messages. When not even the
//     newest message fits, the window holds that message alone. Why: the
//     newest messages are what the next prompt answers, and a window that
//     may pass its budget by at most one message is what a caller can
//     plan for; keeping a whole over-long turn verbatim (the rule before
//     issue 26) let one session return megabytes. The messages cut are
//     named in Truncation so the client can read them with the message list.
//   - Everything else is within the budget (CountTokens of each item), so
//     a window exceeds its budget by at most one message.
//   - The byte cap (MaxBytes) is counted on the items' JSON, newest first:
//     the first item that would pass it is left out with every older one,
//     the message part then starting as after a budget cut; Truncation
//     names the messages left out.

// WindowParams are a window request with the defaults resolved.
type WindowParams struct {
	Strategy   policy.WindowStrategy
	Budget     int
	FreshTail  int
	BufferSize int
	// MaxBytes caps the window's JSON; 0 means no cap (table tests).
	MaxBytes int
}

// WindowLoad says how the Store loaded the messages it gives AssembleWindow.
type WindowLoad struct {
	// TailSeq and TailTokens: the fresh tail starts before the loaded
	// messages. When they already exceed the budget but the tail's turn
	// start lies further back, the Store asks the database where it is and
	// how many tokens lie between it and the first loaded message, instead
	// of loading them. Zero when the tail starts in the loaded messages.
	TailSeq    int64
	TailTokens int
	// Stubs: the first Stubs messages were loaded without their content,
	// once the content loaded had passed the byte cap, so the rules still
	// see what they would have chosen (and the window names it as left
	// out). They are never given: the byte cap cuts before them.
	Stubs int
}

// IsTurnStart: a window's message part may begin on m.
func IsTurnStart(m Message) bool { return m.Role == RoleUser || m.Role == RoleSystem }

// FreshStart is the index where the fresh tail of k messages begins (see
// the rules above); len(msgs) when there is no message part.
func FreshStart(msgs []Message, k int) int {
	i0 := max(0, len(msgs)-k)
	for i := min(i0, len(msgs)-1); i >= 0; i-- {
		if IsTurnStart(msgs[i]) {
			return i
		}
	}
	for i := i0 + 1; i < len(msgs); i++ {
		if IsTurnStart(msgs[i]) {
			return i
		}
	}
	return len(msgs)
}

// SuffixTokens[i] is the token sum of msgs[i:].
func SuffixTokens(msgs []Message) []int {
	out := make([]int, len(msgs)+1)
	for i := len(msgs) - 1; i >= 0; i-- {
		out[i] = out[i+1] + msgs[i].Tokens
	}
	return out
}

// fitStart is the earliest turn start in [lo, f] from which msgs[start:]
// fits budget; f (the fresh tail) when none does.
func fitStart(msgs []Message, suffix []int, lo, f, budget int) int {
	for i := lo; i < f; i++ {
		if IsTurnStart(msgs[i]) && suffix[i] <= budget {
			return i
		}
	}
	return f
}

// preferredStart moves a cut at c forward to the first turn start of
// msgs[c:], else to its first assistant message (a tool result does not
// lead without its call when the call is there), else leaves it at c.
func preferredStart(msgs []Message, c int) int {
	firstAssistant := -1
	for i := c; i < len(msgs); i++ {
		if IsTurnStart(msgs[i]) {
			return i
		}
		if firstAssistant < 0 && msgs[i].Role == RoleAssistant {
			firstAssistant = i
		}
	}
	if firstAssistant >= 0 {
		return firstAssistant
	}
	return c
}

// cutStart is where a fresh tail over the budget is cut: the oldest of the
// newest messages that fit the budget (the newest alone when none does),
// moved to its preferred start.
func cutStart(msgs []Message, suffix []int, budget int) int {
	c := len(msgs) - 1
	for c > 0 && suffix[c-1] <= budget {
		c--
	}
	return preferredStart(msgs, c)
}

// usableRoots are the roots that end before seq fseq (a summary never
// repeats what the verbatim fresh tail holds), and the highest seq they cover.
func usableRoots(roots []Summary, fseq int64) ([]Summary, int64) {
	var out []Summary
	var covered int64
	for _, r := range roots {
		if r.LatestSeq < fseq {
			out = append(out, r)
			covered = max(covered, r.LatestSeq)
		}
	}
	return out, covered
}

// tailSeq is the seq the fresh tail starts at (after the last message when
// there is no message part).
func tailSeq(msgs []Message, f int) int64 {
	if f < len(msgs) {
		return msgs[f].Seq
	}
	if len(msgs) > 0 {
		return msgs[len(msgs)-1].Seq + 1
	}
	return 1
}

// windowPlan is what the rules choose before the byte cap: the summaries,
// the index of the first message, and the seq the rules begin at (the
// first summary's or message's, or the fresh tail's start when it was cut).
type windowPlan struct {
	summaries  []Summary
	start      int
	from       int64
	overBudget bool
}

// planWindow applies the token rules of p.Strategy (see the top of this file).
func planWindow(p WindowParams, msgs []Message, roots []Summary, suffix []int, load WindowLoad) windowPlan {
	f := FreshStart(msgs, p.FreshTail)
	tail, fseq := suffix[f], tailSeq(msgs, f)
	if load.TailSeq > 0 {
		// The Store looks for the tail's start only once the loaded
		// messages are over the budget: the tail is.
		tail, fseq = load.TailTokens+suffix[0], load.TailSeq
	}
	if tail > p.Budget {
		return windowPlan{start: cutStart(msgs, suffix, p.Budget), from: fseq, overBudget: true}
	}
	plan := windowPlan{start: f}
	switch p.Strategy {
	case policy.WindowBuffer:
		lo := min(max(0, len(msgs)-p.BufferSize), f)
		plan.start = fitStart(msgs, suffix, lo, f, p.Budget)
	case policy.WindowToken:
		plan.start = fitStart(msgs, suffix, 0, f, p.Budget)
	case policy.WindowSummary:
		use, covered := usableRoots(roots, fseq)
		left, sumTokens := p.Budget-tail, 0
		first := len(use)
		for first > 0 && use[first-1].Tokens <= left {
			first--
			left -= use[first].Tokens
			sumTokens += use[first].Tokens
		}
		plan.summaries = use[first:]
		lo := f
		for i, m := range msgs[:f] {
			if m.Seq > covered {
				lo = i
				break
			}
		}
		plan.start = fitStart(msgs, suffix, lo, f, p.Budget-sumTokens)
	}
	plan.from = tailSeq(msgs, plan.start)
	if len(plan.summaries) > 0 {
		plan.from = plan.summaries[0].EarliestSeq
	}
	return plan
}

// AssembleWindow builds a window. msgs is a chronological suffix of the
// session's messages holding at least every message the strategy could use
// (WindowNeedsMore says when it does not yet); roots are the session's root
// summaries in order (used by the summary strategy only); total is the
// session's message count (for Dropped); load says what of msgs was not
// loaded whole.
func AssembleWindow(p WindowParams, msgs []Message, roots []Summary, total int64, load WindowLoad) *Window {
	w := &Window{Strategy: p.Strategy, Budget: p.Budget, Items: []WindowItem{}}
	plan := planWindow(p, msgs, roots, SuffixTokens(msgs), load)
	w.FreshTailOverBudget = plan.overBudget
	start, sums := fitBytes(w, plan, msgs, p.MaxBytes, load.Stubs)
	for i := range sums {
		w.Items = append(w.Items, WindowItem{Kind: KindSummary, Summary: &sums[i]})
		w.Tokens += sums[i].Tokens
	}
	for i := start; i < len(msgs); i++ {
		m := msgs[i]
		w.Items = append(w.Items, WindowItem{Kind: KindMessage, Message: &m})
		w.Tokens += m.Tokens
	}
	given := tailSeq(msgs, start)
	if len(sums) > 0 {
		given = sums[0].EarliestSeq
	}
	w.Omit(plan.from, given)
	w.Dropped = int(total) - (len(msgs) - start)
	return w
}

// fitBytes applies the byte cap to a plan: the items' JSON is counted
// newest first; when a message does not fit, the message part starts after
// it (at its preferred start) and no summary is given; when a summary does
// not fit, it and the older ones are left out. A stub (loaded without its
// content) never fits. It returns the first message and the summaries given.
func fitBytes(w *Window, plan windowPlan, msgs []Message, maxBytes, stubs int) (int, []Summary) {
	b := core.NewAnswerBytes(maxBytes, w)
	cut := len(msgs)
	for cut > plan.start && cut > stubs && b.Take(WindowItem{Kind: KindMessage, Message: &msgs[cut-1]}) {
		cut--
	}
	if cut > plan.start {
		return preferredStart(msgs, cut), nil
	}
	k := len(plan.summaries)
	for k > 0 && b.Take(WindowItem{Kind: KindSummary, Summary: &plan.summaries[k-1]}) {
		k--
	}
	return cut, plan.summaries[k:]
}

// WindowNeedsMore reports whether msgs (a chronological suffix of the
// session, beginning at seq msgs[0].Seq) may lack messages the window could
// use, so the Store must load an older page first.
func WindowNeedsMore(p WindowParams, msgs []Message, roots []Summary) bool {
	if len(msgs) == 0 || msgs[0].Seq <= 1 {
		return false
	}
	// Past the budget no older message can be used; a fresh tail starting
	// further back is then over it, and the Store finds its start without
	// loading it (WindowLoad.TailSeq). (Past the byte cap the Store loads
	// on, without content: the rules must still see what they would choose.)
	if SuffixTokens(msgs)[0] > p.Budget {
		return false
	}
	// The fresh tail must begin on a turn start at or before its first message.
	i0 := len(msgs) - p.FreshTail
	if i0 < 0 {
		return true
	}
	hasStart := false
	for i := i0; i >= 0; i-- {
		if IsTurnStart(msgs[i]) {
			hasStart = true
			break
		}
	}
	if !hasStart {
		return true
	}
	switch p.Strategy {
	case policy.WindowBuffer:
		return len(msgs) < p.BufferSize
	case policy.WindowSummary:
		_, covered := usableRoots(roots, tailSeq(msgs, FreshStart(msgs, p.FreshTail)))
		if msgs[0].Seq <= covered+1 {
			return false
		}
	}
	return true
}

// ContentBytes is the sum of the messages' content lengths.
func ContentBytes(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	return n
}
