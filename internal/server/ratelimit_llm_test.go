package server

import (
	"strconv"
	"testing"
	"time"
)

// TestLLMBucketChargesEachModelCall: the LLM bucket counts model calls, not
// requests (issue 26, LOW). Ending a session of 3 user turns asks the fake
// model k ≥ 2 times (the extraction's facts, the episode's summary); with a bucket of 2
// refilling at 1 a minute, of a clock that stands still, the bucket then
// owes k − 2 tokens, so the next LLM-backed request is refused with a
// Retry-After of (k − 1) minutes and reaches no model (charged per
// request, it would have been admitted: one token was left). The request
// that made the calls ran to its end. Once the clock has moved by that
// wait, the next one is admitted.
func TestLLMBucketChargesEachModelCall(t *testing.T) {
	chat := ltmChat(t)
	tn := newTenant(t)
	tok := newTestToken(t)
	clock := newTestClock()
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: ltmConfig(chat)(tn.schema),
		args: []string{"--rate-limit-per-minute=600", "--rate-limit-burst=200",
			"--llm-rate-limit-per-minute=1", "--llm-rate-limit-burst=2"},
		tokens: []string{tok + " role=agent owner=alice name=agent-a"},
		clock:  clock.now})
	newSessionWithTurns(t, srv, "alice", "s0", "helper", 3)
	newSessionWithTurns(t, srv, "alice", "s1", "helper", 3)
	extract := req{method: "POST", path: sessPath("alice", "s1", "extract"), token: tok}

	srv.do(t, req{method: "POST", path: sessPath("alice", "s0", "end"), token: tok}).want(t, 200)
	k := int(chat.calls.Load())
	if k < 2 {
		t.Fatalf("ending the session made %d model calls, want two or more (the test's premise)", k)
	}
	wait := (k - 1) * 60
	r := srv.do(t, extract)
	want429(t, r, wait+1)
	if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra < wait {
		t.Fatalf("Retry-After %d s after an end of %d model calls, want %d (one token per call)", ra, k, wait)
	}
	if got := int(chat.calls.Load()); got != k {
		t.Fatalf("the refused request made %d model calls, want none", got-k)
	}
	clock.advance(time.Duration(wait-1) * time.Second)
	want429(t, srv.do(t, extract), 2)
	clock.advance(2 * time.Second)
	srv.do(t, extract).want(t, 200)
}

// TestLLMDebtIsCappedAtOneBurst (issue 26's fifth review, LOW): the
// further model calls of an admitted request were charged without bound,
// so one request could put its credential's bucket hours into debt. The
// debt stops at one burst: the wait after any number of charges is at
// most the refill of a burst and a token.
func TestLLMDebtIsCappedAtOneBurst(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBuckets(RateLimit{PerMinute: 1, Burst: 2}, func() time.Time { return now })
	for range 100 {
		b.charge("k")
	}
	ok, wait := b.take("k")
	if ok || wait > 3*time.Minute {
		t.Fatalf("after 100 charges of a bucket of 2 refilling 1 a minute: ok %v, wait %s; want refused for at most 3m (a burst of debt, then a token)", ok, wait)
	}
}
