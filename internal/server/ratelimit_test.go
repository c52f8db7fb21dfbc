package server

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// rateFacts are distinct enough that no write merges into another.
var rateFacts = []string{
	"Ann keeps bees on the roof of her building",
	"Ben repairs vintage motorcycles on weekends",
	"Ann's daughter studies marine biology in Bergen",
	"Ben is allergic to shellfish",
	"Ann prefers aisle seats on long flights",
	"Ben plays the cello in a community orchestra",
	"Ann writes her notes in Esperanto",
	"Ben drives an electric van for deliveries",
}

// metricValue reads one sample of the metrics text, 0 when absent.
func metricValue(t *testing.T, text, series string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// want429 checks a rate-limited answer: 429 problem+json of the stable
// type with a Retry-After in whole seconds within 1..max.
func want429(t *testing.T, r *response, maxWait int) {
	t.Helper()
	if r.status != 429 {
		t.Fatalf("status %d, want 429; body %s", r.status, r.body)
	}
	if p := r.problem(t); p.Type != ProblemBase+"rate-limited" || p.Status != 429 {
		t.Fatalf("429 problem %+v, want type rate-limited", p)
	}
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > maxWait {
		t.Fatalf("Retry-After %q, want whole seconds within 1..%d", r.header.Get("Retry-After"), maxWait)
	}
}

// testClock is the rate limits' clock of a test: it stands still until the
// test moves it, so a bucket holds what the test's requests left in it,
// however long they took on a busy machine.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestRateLimitPerCredential: with a bucket of 5 refilling at 1 a minute
// (of a clock that stands still), a credential gets exactly its burst,
// then 429 problem+json with Retry-After, counted in the metric; the bucket
// is the credential's whatever owner the path names and through MCP too;
// another static token and a signed token whose subject is the first
// token's name are unaffected; every acknowledged write is readable and no
// refused one was stored.
func TestRateLimitPerCredential(t *testing.T) {
	const burst = 5
	tn := newTenant(t)
	tokA, tokB := newTestToken(t), newTestToken(t)
	srv := tn.serve(t, serverSetup{
		args:   []string{"--rate-limit-per-minute=1", "--rate-limit-burst=" + strconv.Itoa(burst)},
		tokens: []string{tokA + " role=agent name=agent-a", tokB + " role=agent name=agent-b"},
		clock:  newTestClock().now})

	owners := []string{"owner-ann7", "owner-ben7"}
	acked := map[string]string{} // memory id -> content
	var refused []string
	n429 := 0
	for i, fact := range rateFacts {
		owner := owners[i%2]
		r := srv.do(t, req{method: "POST", path: memPath(owner, "memories"), token: tokA, body: map[string]any{"content": fact}})
		switch {
		case r.status == 201:
			var res memory.AddResult
			r.decode(t, &res)
			if res.Action != memory.ActionAdded {
				t.Fatalf("write %d: action %s, want added (distinct facts)", i, res.Action)
			}
			acked[res.Memory.ID] = fact
		case i < burst:
			t.Fatalf("write %d of a full bucket of %d: status %d %s", i, burst, r.status, r.body)
		default:
			want429(t, r, 60)
			n429++
			refused = append(refused, fact)
		}
	}
	if len(acked) != burst {
		t.Fatalf("%d writes acknowledged of %d, want the burst of %d", len(acked), len(rateFacts), burst)
	}
	if len(refused) == 0 {
		t.Fatal("no write was refused")
	}

	// The bucket is the credential's: another owner, and MCP, get 429 too.
	others := []req{
		{method: "POST", path: memPath("owner-cat7", "memories"), token: tokA, body: map[string]any{"content": "Cat collects old maps"}},
		{method: "POST", path: "/mcp", token: tokA, body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
			header: map[string]string{"Accept": "application/json, text/event-stream"}},
	}
	for _, o := range others {
		r := srv.do(t, o)
		want429(t, r, 60)
		n429++
		if o.path != "/mcp" {
			refused = append(refused, o.body.(map[string]any)["content"].(string))
		}
	}

	// Other credentials have buckets of their own: another static token, and
	// a signed token whose subject is agent-a's name (separate spaces).
	signed, err := auth.MintAgent(srv.signingKey, "", "agent-a", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"agent-b": tokB, "signed agent-a": signed} {
		var res memory.AddResult
		fact := "Ann learned to sail with " + name
		srv.do(t, req{method: "POST", path: memPath(owners[0], "memories"), token: tok, body: map[string]any{"content": fact}}).want(t, 201).decode(t, &res)
		acked[res.Memory.ID] = fact
	}

	// Counted: every 429 of this test, by class api.
	m := srv.scrape(t)
	if got := metricValue(t, m, `engram_rate_limited_total{class="api",outcome="rejected"}`); got != n429 {
		t.Errorf("engram_rate_limited_total{class=api,outcome=rejected} = %d, want %d (the 429s answered)", got, n429)
	}
	if strings.Contains(m, "agent-a") || strings.Contains(m, "owner-") {
		t.Error("the metrics name a credential or an owner")
	}

	// Nothing acknowledged is lost, nothing refused was stored.
	stored := map[string]string{}
	for _, owner := range append(owners, "owner-cat7") {
		var page memory.ListPage
		srv.do(t, req{method: "GET", path: memPath(owner, "memories") + "?limit=100"}).want(t, 200).decode(t, &page)
		for _, mem := range page.Items {
			stored[mem.ID] = mem.Content
		}
	}
	for id, content := range acked {
		if stored[id] != content {
			t.Errorf("acknowledged write %s (%q) reads back as %q", id, content, stored[id])
		}
	}
	for _, content := range refused {
		for _, got := range stored {
			if got == content {
				t.Errorf("the refused write %q was stored", content)
			}
		}
	}
	if len(stored) != len(acked) {
		t.Errorf("%d memories stored, %d writes acknowledged", len(stored), len(acked))
	}
}

// TestLLMCallsHaveLowerLimit: the LLM-backed requests (session extract,
// end, message extract, MCP extract_session) draw from a second bucket of
// 2 refilling at 1 a minute (of a clock that stands still) while the
// request bucket (200) has room: one extraction's model calls take it all,
// and the next LLM-backed request gets 429 (a tool error through MCP),
// reaches no model and writes nothing (the session stays open); other
// requests of the same token go on, an add whose dedup would ask the
// arbiter is stored without asking it, and another token's LLM bucket is
// its own.
func TestLLMCallsHaveLowerLimit(t *testing.T) {
	chat := ltmChat(t)
	tn := newTenant(t)
	tokA, tokB := newTestToken(t), newTestToken(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: ltmConfig(chat)(tn.schema),
		args: []string{"--rate-limit-per-minute=600", "--rate-limit-burst=200",
			"--llm-rate-limit-per-minute=1", "--llm-rate-limit-burst=2"},
		tokens: []string{tokA + " role=agent owner=alice name=agent-a", tokB + " role=agent owner=alice name=agent-b"},
		clock:  newTestClock().now})
	newSessionWithTurns(t, srv, "alice", "s0", "helper", 3)
	newSessionWithTurns(t, srv, "alice", "s1", "helper", 3)

	// One end of a session: its model calls (the extraction's, the
	// episode's summary: two or more) take the burst.
	srv.do(t, req{method: "POST", path: sessPath("alice", "s0", "end"), token: tokA}).want(t, 200)
	calls := chat.calls.Load()
	if calls < 2 {
		t.Fatalf("ending the session made %d model calls, want two or more (the test's premise)", calls)
	}

	// The third, whatever its route, is refused before any model call.
	for _, r := range []req{
		{method: "POST", path: sessPath("alice", "s1", "extract"), token: tokA},
		{method: "POST", path: sessPath("alice", "s1", "end"), token: tokA},
		{method: "POST", path: memPath("alice", "extract"), token: tokA, body: map[string]any{"messages": []map[string]any{
			{"role": "user", "content": "I moved to Lisbon last month"}}}},
	} {
		want429(t, srv.do(t, r), 60*int(calls))
	}
	session := mcpSession(t, srv, tokA)
	if res := callToolRaw(t, session, "extract_session", map[string]any{"session": "s1"}); !res.IsError || !strings.Contains(text(res), "Rate limit exceeded") {
		t.Fatalf("extract_session over the LLM limit: %s (error %v), want a rate-limit tool error", text(res), res.IsError)
	}
	if got := chat.calls.Load(); got != calls {
		t.Fatalf("%d model calls after the refusals, want none", got-calls)
	}
	var sess memory.Session
	srv.do(t, req{method: "GET", path: sessPath("alice", "s1")}).want(t, 200).decode(t, &sess)
	if sess.Archived {
		t.Fatal("a refused /end archived the session")
	}

	// The request bucket still has room: reads and writes go on, and an add
	// in the arbitration band is stored without asking the model.
	srv.do(t, req{method: "GET", path: sessPath("alice", "s1", "messages"), token: tokA}).want(t, 200)
	var add memory.AddResult
	srv.do(t, req{method: "POST", path: memPath("alice", "memories"), token: tokA,
		body: map[string]any{"content": "The user lives in Lisbon now, near the river"}}).want(t, 201).decode(t, &add)
	if !strings.HasPrefix(add.Arbiter, "fallback: ") || !strings.Contains(add.Arbiter, "rate limit") {
		t.Fatalf("add in the arbitration band over the LLM limit: action %s arbiter %q, want a fallback naming the rate limit", add.Action, add.Arbiter)
	}
	if got := chat.calls.Load(); got != calls {
		t.Fatalf("the arbiter asked the model %d times over the LLM limit", got-calls)
	}

	// Another token's LLM bucket is its own.
	srv.do(t, req{method: "POST", path: sessPath("alice", "s1", "extract"), token: tokB}).want(t, 200)

	m := srv.scrape(t)
	for series, want := range map[string]int{
		`engram_rate_limited_total{class="llm",outcome="rejected"}`:            4,
		`engram_rate_limited_total{class="llm",outcome="arbitration_skipped"}`: 1,
		`engram_rate_limited_total{class="api",outcome="rejected"}`:            0,
		`engram_upstream_errors_total{service="llm"}`:                          0,
	} {
		if got := metricValue(t, m, series); got != want || !strings.Contains(m, series) {
			t.Errorf("%s = %d, want %d", series, got, want)
		}
	}
}

// TestRateLimitBuckets: the Retry-After of an empty bucket is the wait for
// one token; full buckets are forgotten (nothing lost); the table never
// holds more than maxBuckets, the least recently seen going first.
func TestRateLimitBuckets(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBuckets(RateLimit{PerMinute: 30, Burst: 2}, func() time.Time { return now })
	for i := range 2 {
		if ok, _ := b.take("k"); !ok {
			t.Fatalf("take %d of a full bucket of 2 refused", i)
		}
	}
	if ok, wait := b.take("k"); ok || wait != 2*time.Second {
		t.Fatalf("empty bucket: ok %v wait %s, want refused with 2s (30 a minute)", ok, wait)
	}
	now = now.Add(time.Second)
	if ok, wait := b.take("k"); ok || wait != time.Second {
		t.Fatalf("half a token later: ok %v wait %s, want 1s", ok, wait)
	}
	now = now.Add(time.Second)
	if ok, _ := b.take("k"); !ok {
		t.Fatal("a token came back and was refused")
	}
	if p := rateLimitedProblem("requests", RateLimit{PerMinute: 30, Burst: 2}, 1500*time.Millisecond); p.retryAfter != 2 || p.Status != 429 {
		t.Fatalf("Retry-After of a 1.5 s wait = %d, want 2 (whole seconds, rounded up)", p.retryAfter)
	}

	// Fill the table: refused takes keep their state, the oldest goes first.
	for i := range maxBuckets + 10 {
		now = now.Add(time.Millisecond)
		b.take(fmt.Sprint("key-", i))
		b.take(fmt.Sprint("key-", i)) // empty it, so no sweep may drop it
	}
	if n := b.size(); n > maxBuckets {
		t.Fatalf("%d buckets kept, want at most %d", n, maxBuckets)
	}
	b.mu.Lock()
	_, first := b.m["key-0"]
	_, last := b.m[fmt.Sprint("key-", maxBuckets+9)]
	b.mu.Unlock()
	if first || !last {
		t.Errorf("after overflowing: oldest kept %v, newest kept %v; want the oldest evicted", first, last)
	}
	// After a while every bucket is full again, and the next new key sweeps them.
	now = now.Add(time.Hour)
	b.take("late")
	if n := b.size(); n != 1 {
		t.Errorf("%d buckets kept after an hour idle, want 1 (the full ones swept)", n)
	}
	b.mu.Lock()
	_, late := b.m["late"]
	b.mu.Unlock()
	if !late {
		t.Error("the new bucket is not kept")
	}
}

// BenchmarkRateLimitTake is the cost of the check on every API request:
// one bucket of 1,000 credentials, taken from in parallel.
func BenchmarkRateLimitTake(b *testing.B) {
	bk := newBuckets(RateLimit{PerMinute: 6_000_000, Burst: 100_000}, time.Now)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("static:token-", i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			bk.take(keys[i%len(keys)])
			i++
		}
	})
}
