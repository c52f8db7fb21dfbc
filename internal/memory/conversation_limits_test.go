package memory

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// wantQuota fails unless err is a *QuotaError of quota with these counts.
func wantQuota(t *testing.T, err error, quota string, limit, current, requested int64) {
	t.Helper()
	var qe *QuotaError
	if !errors.As(err, &qe) {
		t.Fatalf("err = %v, want a *QuotaError of %s", err, quota)
	}
	if qe.Quota != quota || qe.Limit != limit || qe.Current != current || qe.Requested != requested {
		t.Fatalf("quota error %+v, want %s limit %d current %d requested %d", qe, quota, limit, current, requested)
	}
	if !strings.Contains(qe.Error(), quota) {
		t.Fatalf("message %q does not name the quota", qe.Error())
	}
}

// assistantBatch is n assistant messages.
func assistantBatch(n int, text string) []TurnMessage {
	out := make([]TurnMessage, n)
	for i := range out {
		out[i] = assistantTurn(fmt.Sprintf("%s %d", text, i))
	}
	return out
}

// wantStored fails unless the session holds exactly n messages, by its
// counters and by its rows.
func (f *fixture) wantStored(owner, session string, n int64) {
	f.t.Helper()
	sess, err := f.store.GetSession(ctx(f.t), owner, session)
	if err != nil {
		f.t.Fatal(err)
	}
	rows := f.n(`SELECT count(*) FROM ` + f.store.sql.messages + ` WHERE owner_id = '` + owner + `' AND session_id = '` + session + `'`)
	if sess.MessageCount != n || rows != n {
		f.t.Fatalf("session %s: messageCount %d, %d rows; want %d", session, sess.MessageCount, rows, n)
	}
}

// TestTurnLengthIsBoundedAcrossAppends is issue 26's reproduction: one
// user message, then 60 appends of 50 assistant messages, each within the
// per-append limit. With the default maxTurnMessages of 500 the 10th
// append (to 501) is refused, naming the limit and the turn's length, and
// so is every later one; nothing of them is stored. A user message starts
// a new turn, which is accepted.
func TestTurnLengthIsBoundedAcrossAppends(t *testing.T) {
	f := newFixture(t)
	lim := f.store.core.Policy.Conversation.Limits
	if lim.MaxTurnMessages != 500 || lim.MaxMessagesPerTurn != 50 {
		t.Fatalf("default limits %+v, want maxTurnMessages 500 and maxMessagesPerTurn 50", lim)
	}
	f.newSession("amy", "flood")
	f.appendTurn("amy", "flood", userTurn("Tell me everything."))
	accepted := 0
	for i := range 60 {
		_, err := f.store.AppendTurn(ctx(t), AppendRequest{Owner: "amy", SessionID: "flood", Messages: assistantBatch(50, "more")})
		if err == nil {
			accepted++
			continue
		}
		if i < 9 {
			t.Fatalf("append %d refused below the limit: %v", i+1, err)
		}
		wantQuota(t, err, QuotaTurnMessages, 500, 451, 50)
	}
	if accepted != 9 {
		t.Fatalf("%d appends accepted, want 9 (1 + 9 × 50 = 451 messages)", accepted)
	}
	f.wantStored("amy", "flood", 451)
	// The turn is full, not the session: a new turn goes in.
	r := f.appendTurn("amy", "flood", userTurn("Thanks, that is enough."), assistantTurn("You're welcome."))
	if r.Messages[0].Seq != 452 {
		t.Fatalf("new turn stored from seq %d, want 452", r.Messages[0].Seq)
	}
}

// TestTurnTokensAreBoundedAcrossAppends: maxTurnTokens counts every
// message of the turn, across appends; a refused append stores nothing.
func TestTurnTokensAreBoundedAcrossAppends(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Conversation.Limits.MaxTurnTokens = 1000 }))
	hundred := strings.Repeat("abcd", 100) // 400 ASCII bytes: 100 tokens
	if CountTokens(hundred) != 100 {
		t.Fatalf("CountTokens = %d, want 100", CountTokens(hundred))
	}
	f.newSession("ben", "long")
	f.appendTurn("ben", "long", userTurn(hundred))
	three := []TurnMessage{assistantTurn(hundred), assistantTurn(hundred), assistantTurn(hundred)}
	for range 3 {
		f.appendTurn("ben", "long", three...) // 100 + 3 × 300 = 1000 tokens: at the limit, not past it
	}
	_, err := f.store.AppendTurn(ctx(t), AppendRequest{Owner: "ben", SessionID: "long", Messages: three})
	wantQuota(t, err, QuotaTurnTokens, 1000, 1000, 300)
	f.wantStored("ben", "long", 10)
	// One append that starts a turn and passes the limit on its own.
	big := []TurnMessage{userTurn(hundred)}
	for range 10 {
		big = append(big, assistantTurn(hundred))
	}
	_, err = f.store.AppendTurn(ctx(t), AppendRequest{Owner: "ben", SessionID: "long", Messages: big})
	wantQuota(t, err, QuotaTurnTokens, 1000, 0, 1100)
	f.wantStored("ben", "long", 10)
}

// TestTurnLimitBindsSessionsWithoutUserMessages: messages before a
// session's first user or system message are a turn too, so a client that
// never sends one is bounded like any other.
func TestTurnLimitBindsSessionsWithoutUserMessages(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Conversation.Limits.MaxTurnMessages = 60 }))
	f.newSession("cal", "headless")
	f.appendTurn("cal", "headless", assistantBatch(50, "a")...)
	_, err := f.store.AppendTurn(ctx(t), AppendRequest{Owner: "cal", SessionID: "headless", Messages: assistantBatch(11, "b")})
	wantQuota(t, err, QuotaTurnMessages, 60, 50, 11)
	f.appendTurn("cal", "headless", assistantBatch(10, "c")...)
	f.wantStored("cal", "headless", 60)
}

// TestTurnLimitBindsTurnsStoredBeforeIt: a turn already longer than the
// limit (stored before the limit existed, or before it was lowered) takes
// no more assistant messages; the check reads at most maxTurnMessages rows
// of it and reports that many.
func TestTurnLimitBindsTurnsStoredBeforeIt(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Conversation.Limits.MaxTurnMessages = 60 }))
	f.newSession("dan", "legacy")
	f.appendTurn("dan", "legacy", userTurn("start"))
	f.x(`INSERT INTO ` + f.store.sql.messages + ` (owner_id, session_id, seq, role, content, tokens)
		SELECT 'dan', 'legacy', s, 'assistant', 'old answer', 3 FROM generate_series(2, 100) AS s`)
	f.x(`UPDATE ` + f.store.sql.sessions + ` SET message_count = 100, next_seq = 101, token_count = 300 WHERE owner_id = 'dan'`)
	_, err := f.store.AppendTurn(ctx(t), AppendRequest{Owner: "dan", SessionID: "legacy", Messages: assistantBatch(1, "one more")})
	wantQuota(t, err, QuotaTurnMessages, 60, 60, 1)
	f.wantStored("dan", "legacy", 100)
	f.appendTurn("dan", "legacy", userTurn("a new question"))
	f.wantStored("dan", "legacy", 101)
}

// TestMessagesPerSessionQuota: the append that would pass
// maxMessagesPerSession is refused whole (nothing stored) and names the
// session's count; a new session takes messages again.
func TestMessagesPerSessionQuota(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Conversation.Limits.MaxMessagesPerSession = 10 }))
	f.newSession("eve", "full")
	for range 4 {
		f.appendTurn("eve", "full", userTurn("q"), assistantTurn("a"))
	}
	_, err := f.store.AppendTurn(ctx(t), AppendRequest{Owner: "eve", SessionID: "full",
		Messages: []TurnMessage{userTurn("q"), assistantTurn("a"), assistantTurn("and more")}})
	wantQuota(t, err, QuotaMessagesPerSession, 10, 8, 3)
	f.wantStored("eve", "full", 8)
	f.appendTurn("eve", "full", userTurn("q"), assistantTurn("a"))
	f.wantStored("eve", "full", 10)
	f.newSession("eve", "next")
	f.appendTurn("eve", "next", userTurn("q"))
}
