package memory

// Context windows as pure functions: the Store loads the rows a window can
// use (Store.Window) and assembleWindow decides what goes in, so every rule
// below is table-tested without a database.
//
// Rules common to every strategy:
//   - Items are in chronological order (summaries, then messages).
//   - The message part starts on a "turn start": a user or system message.
//     It never starts on an assistant or tool message, so a tool result is
//     never separated from the assistant message that called it. Where a cut
//     would fall inside a turn, the window drops the turn's leading
//     assistant/tool messages (it moves the cut forward to the next turn
//     start), which keeps it within budget.
//   - The fresh tail — the newest FreshTail messages, its start moved BACK to
//     the turn start at or before it, so it holds whole turns — is always
//     kept verbatim, even when it alone exceeds the budget
//     (FreshTailOverBudget). When no turn start precedes it (a session that
//     begins with assistant messages), it starts at the first turn start
//     after that point; a session without any user or system message has
//     no message part.
//   - Everything else is within the budget (CountTokens of each item).

// windowParams are a window request with the defaults resolved.
type windowParams struct {
	Strategy   WindowStrategy
	Budget     int
	FreshTail  int
	BufferSize int
}

// isTurnStart: a window's message part may begin on m.
func isTurnStart(m ConversationMessage) bool { return m.Role == RoleUser || m.Role == RoleSystem }

// freshStart is the index where the fresh tail of k messages begins (see
// the rules above); len(msgs) when there is no message part.
func freshStart(msgs []ConversationMessage, k int) int {
	i0 := max(0, len(msgs)-k)
	for i := min(i0, len(msgs)-1); i >= 0; i-- {
		if isTurnStart(msgs[i]) {
			return i
		}
	}
	for i := i0 + 1; i < len(msgs); i++ {
		if isTurnStart(msgs[i]) {
			return i
		}
	}
	return len(msgs)
}

// suffixTokens[i] is the token sum of msgs[i:].
func suffixTokens(msgs []ConversationMessage) []int {
	out := make([]int, len(msgs)+1)
	for i := len(msgs) - 1; i >= 0; i-- {
		out[i] = out[i+1] + msgs[i].Tokens
	}
	return out
}

// fitStart is the earliest turn start in [lo, f] from which msgs[start:]
// fits budget; f (the fresh tail) when none does.
func fitStart(msgs []ConversationMessage, suffix []int, lo, f, budget int) int {
	for i := lo; i < f; i++ {
		if isTurnStart(msgs[i]) && suffix[i] <= budget {
			return i
		}
	}
	return f
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
func tailSeq(msgs []ConversationMessage, f int) int64 {
	if f < len(msgs) {
		return msgs[f].Seq
	}
	if len(msgs) > 0 {
		return msgs[len(msgs)-1].Seq + 1
	}
	return 1
}

// assembleWindow builds a window. msgs is a chronological suffix of the
// session's messages holding at least every message the strategy could use
// (windowNeedsMore says when it does not yet); roots are the session's root
// summaries in order (used by the summary strategy only); total is the
// session's message count (for Dropped).
func assembleWindow(p windowParams, msgs []ConversationMessage, roots []Summary, total int64) *Window {
	w := &Window{Strategy: p.Strategy, Budget: p.Budget, Items: []WindowItem{}}
	suffix := suffixTokens(msgs)
	f := freshStart(msgs, p.FreshTail)
	tail := suffix[f]
	w.FreshTailOverBudget = tail > p.Budget
	start := f
	switch p.Strategy {
	case WindowBuffer:
		lo := min(max(0, len(msgs)-p.BufferSize), f)
		start = fitStart(msgs, suffix, lo, f, p.Budget)
	case WindowToken:
		start = fitStart(msgs, suffix, 0, f, p.Budget)
	case WindowSummary:
		use, covered := usableRoots(roots, tailSeq(msgs, f))
		left := p.Budget - tail
		first := len(use)
		for first > 0 && use[first-1].Tokens <= left {
			first--
			left -= use[first].Tokens
		}
		for i := first; i < len(use); i++ {
			sum := use[i]
			w.Items = append(w.Items, WindowItem{Kind: KindSummary, Summary: &sum})
			w.Tokens += sum.Tokens
		}
		lo := f
		for i, m := range msgs[:f] {
			if m.Seq > covered {
				lo = i
				break
			}
		}
		start = fitStart(msgs, suffix, lo, f, p.Budget-w.Tokens)
	}
	for i := start; i < len(msgs); i++ {
		m := msgs[i]
		w.Items = append(w.Items, WindowItem{Kind: KindMessage, Message: &m})
		w.Tokens += m.Tokens
	}
	w.Dropped = int(total) - (len(msgs) - start)
	return w
}

// windowNeedsMore reports whether msgs (a chronological suffix of the
// session, beginning at seq msgs[0].Seq) may lack messages the window could
// use, so the Store must load an older page first.
func windowNeedsMore(p windowParams, msgs []ConversationMessage, roots []Summary) bool {
	if len(msgs) == 0 || msgs[0].Seq <= 1 {
		return false
	}
	// The fresh tail must begin on a turn start at or before its first message.
	i0 := len(msgs) - p.FreshTail
	if i0 < 0 {
		return true
	}
	hasStart := false
	for i := i0; i >= 0; i-- {
		if isTurnStart(msgs[i]) {
			hasStart = true
			break
		}
	}
	if !hasStart {
		return true
	}
	switch p.Strategy {
	case WindowBuffer:
		return len(msgs) < p.BufferSize
	case WindowSummary:
		_, covered := usableRoots(roots, tailSeq(msgs, freshStart(msgs, p.FreshTail)))
		if msgs[0].Seq <= covered+1 {
			return false
		}
	}
	return suffixTokens(msgs)[0] <= p.Budget
}
