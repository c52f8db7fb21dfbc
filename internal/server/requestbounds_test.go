package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// Bounds of one HTTP request as a whole and of what one credential holds
// at once (issue 26's hostile review, HIGH 1 and 2): a JSON-RPC batch, slow
// request bodies, clients that never read their answer.

// mcpBatchHeaders are those of an MCP POST in protocol 2025-03-26, the
// last version that allowed JSON-RPC batches.
var mcpBatchHeaders = map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-03-26"}

// defaultRateArgs are the default rate limits of a runtime (startServer
// turns them off), so the attacks below run against what is deployed.
var defaultRateArgs = []string{"--rate-limit-per-minute=6000", "--rate-limit-burst=200", "--llm-rate-limit-per-minute=60", "--llm-rate-limit-burst=20"}

// TestMCPBatchIsBounded: one POST /mcp carrying a JSON-RPC batch of 20
// get_window calls, on a runtime whose answers are capped at 64 KiB. Each
// call's result stays within the cap, so before the HTTP answer was 20 of
// them, 20 times the cap (the review's 150 calls answered 85 MB). A batch
// is now refused whole, with or without blanks before the array, with 400
// batch-not-supported and no call run; the same call alone is answered
// within the cap.
func TestMCPBatchIsBounded(t *testing.T) {
	const capBytes, calls = memory.MinMaxResponseBytes, 20
	tn := newTenant(t)
	cfg := testConfig(tn.schema)
	cfg.MaxResponseBytes = capBytes
	tok := newTestToken(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: cfg, args: defaultRateArgs,
		tokens: []string{tok + " role=agent owner=mallory name=mallory"}})
	// One turn of about 40 KB: more than the third of the cap a tool answers within.
	msgs := []map[string]any{{"role": "user", "content": "Run the whole migration and report every step."}}
	for i := range 10 {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": fmt.Sprintf("step %d: ", i) + strings.Repeat("tool output line. ", 220)})
	}
	srv.do(t, req{method: "POST", path: memPath("mallory", "sessions"), token: tok, body: map[string]any{"id": "big"}}).want(t, 201)
	srv.do(t, req{method: "POST", path: sessPath("mallory", "big", "messages"), token: tok, body: map[string]any{"messages": msgs}}).want(t, 201)

	call := func(id int) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
			"name": "get_window", "arguments": map[string]any{"session": "big", "strategy": "token", "budget": 1000000}}}
	}
	single := srv.do(t, req{method: "POST", path: "/mcp", token: tok, body: call(1), header: mcpBatchHeaders}).want(t, 200)
	if len(single.body) > capBytes || !strings.Contains(string(single.body), `\"truncated\":true`) {
		t.Fatalf("one get_window call: %d bytes (cap %d), want a truncated window within the cap: %.300s", len(single.body), capBytes, single.body)
	}

	batch := make([]map[string]any, calls)
	for i := range batch {
		batch[i] = call(i + 2)
	}
	js, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range [][]byte{js, append([]byte(" \r\n\t"), js...)} {
		r := srv.do(t, req{method: "POST", path: "/mcp", token: tok, body: body, header: mcpBatchHeaders})
		if len(r.body) > capBytes {
			t.Errorf("a batch of %d get_window calls was answered with %d bytes, over the runtime's cap of %d", calls, len(r.body), capBytes)
		}
		r.want(t, 400)
		if p := r.problem(t); p.Type != ProblemBase+"batch-not-supported" || !strings.Contains(p.Detail, "one JSON-RPC message") {
			t.Fatalf("batch refused with %+v, want batch-not-supported saying to send one JSON-RPC message a request", p)
		}
	}
	if got := metricValue(t, srv.scrape(t), `engram_mcp_tool_calls_total{outcome="ok",tool="get_window"}`); got != 1 {
		t.Errorf("%d get_window calls ran, want 1 (the single one; no call of a refused batch)", got)
	}
}

// slowRequest sends the headers of an add and the first bytes of its
// 100-byte body on a connection of its own, then nothing more; answers
// gets the status of the answer when one comes.
func slowRequest(t *testing.T, srv *testServer, token string, answers chan<- *http.Response) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "POST /v1/owners/mallory/memories HTTP/1.1\r\nHost: engram\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"content\":", token)
	if err != nil {
		t.Fatal(err)
	}
	go readAnswer(c, answers)
	return c
}

// inflight is the service's gauge of requests holding one of its
// --max-inflight slots.
func inflight(t *testing.T, srv *testServer) int {
	t.Helper()
	return metricValue(t, srv.scrape(t), "engram_http_inflight_requests")
}

// waitUntil polls cond every 50 ms for at most limit; it reports whether
// cond came true (a bound on the test, never an assertion on speed).
func waitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// TestSlowBodiesOfOneCredentialHoldNoSlot: one agent token opens 64
// connections (--max-inflight) and sends the headers of an add and a part
// of its body, then nothing. Before, each request took one of the
// service's 64 slots until the 60 s ReadTimeout, and every other
// credential's request was refused (429 overloaded) although the rate
// limit saw 64 requests. Now a credential has at most
// --max-inflight-per-credential (16) requests in flight: the other 48 are
// refused at once with 429 rate-limited and Retry-After, counted as class
// inflight; and a body is read before its request takes a slot of the
// service, so the 16 hold none: another owner's requests all succeed while
// they trickle. When their clients give up, the credential's requests are
// free again and nothing was stored.
func TestSlowBodiesOfOneCredentialHoldNoSlot(t *testing.T) {
	const conns, perCredential = 64, DefaultMaxInflightPerCredential
	tn := newTenant(t)
	mallory := newTestToken(t)
	srv := tn.serve(t, serverSetup{
		args:   append([]string{"--max-inflight=64", "--body-timeout=60s"}, defaultRateArgs...),
		tokens: []string{mallory + " role=agent owner=mallory name=mallory"}})
	answers := make(chan *http.Response, conns)
	open := make([]net.Conn, conns)
	for i := range open {
		open[i] = slowRequest(t, srv, mallory, answers)
	}
	// Wait until the service has taken all 64: each holds a slot of the
	// service (before), or 48 are refused (now).
	var refused []*http.Response
	if !waitUntil(30*time.Second, func() bool {
		for len(answers) > 0 {
			refused = append(refused, <-answers) //nolint:bodyclose // readAnswer read and closed it
		}
		return len(refused) >= conns-perCredential || inflight(t, srv) >= conns
	}) {
		t.Logf("after 30 s: %d slow requests answered, %d slots held", len(refused), inflight(t, srv))
	}

	// Another owner, another credential: every request succeeds.
	for i := range 10 {
		if r := srv.do(t, req{method: "GET", path: memPath("alice", "memories")}); r.status != 200 {
			t.Fatalf("request %d of another credential while one token trickles %d bodies: %d %s", i, conns, r.status, r.body)
		}
	}
	if len(refused) != conns-perCredential {
		t.Fatalf("%d of %d slow requests of one token answered at once, want %d refused (%d in flight per credential)", len(refused), conns, conns-perCredential, perCredential)
	}
	for _, resp := range refused {
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/problem+json" || err != nil || ra < 1 {
			t.Fatalf("refused slow request: %d %q Retry-After %q, want 429 problem+json with Retry-After", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"))
		}
	}
	m := srv.scrape(t)
	if got := metricValue(t, m, `engram_rate_limited_total{class="inflight",outcome="rejected"}`); got != conns-perCredential {
		t.Errorf(`engram_rate_limited_total{class="inflight",outcome="rejected"} = %d, want %d`, got, conns-perCredential)
	}
	if got := metricValue(t, m, "engram_http_shed_requests_total"); got != 0 {
		t.Errorf("%d requests shed for want of a slot of the service, want 0", got)
	}
	// The same token over its cap now: refused with the detail naming it.
	over := srv.do(t, req{method: "GET", path: memPath("mallory", "memories"), token: mallory})
	want429(t, over, 1)
	if p := over.problem(t); !strings.Contains(p.Detail, fmt.Sprintf("%d requests in flight", perCredential)) {
		t.Errorf("over the cap: %q, want the detail to name the %d requests in flight", p.Detail, perCredential)
	}

	// The clients give up: the token's requests are free again, nothing stored.
	for _, c := range open {
		c.Close()
	}
	var page memory.ListPage
	if !waitUntil(30*time.Second, func() bool {
		r := srv.do(t, req{method: "GET", path: memPath("mallory", "memories"), token: mallory})
		if r.status == 200 {
			r.decode(t, &page)
		}
		return r.status == 200
	}) {
		t.Fatal("the token's requests are still refused 30 s after its slow clients closed their connections")
	}
	if len(page.Items) != 0 {
		t.Errorf("%d memories stored from bodies that never arrived", len(page.Items))
	}
}

// TestSlowBodyIsCutAtTheBodyTimeout: a body that stops arriving is cut at
// --body-timeout (before, the 60 s ReadTimeout of the whole request): the
// request is answered 400 naming the timeout and stores nothing, and the
// credential's request is free again.
func TestSlowBodyIsCutAtTheBodyTimeout(t *testing.T) {
	tn := newTenant(t)
	mallory := newTestToken(t)
	srv := tn.serve(t, serverSetup{
		args:   []string{"--body-timeout=1s", "--max-inflight-per-credential=1"},
		tokens: []string{mallory + " role=agent owner=mallory name=mallory"}})
	answers := make(chan *http.Response, 1)
	slowRequest(t, srv, mallory, answers)
	var resp *http.Response
	select {
	case resp = <-answers:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer 30 s after a body stopped arriving (--body-timeout=1s)")
	}
	if resp.StatusCode != 400 || !resp.Close {
		t.Fatalf("cut body: %d (connection closed: %v); want 400 and the connection closed", resp.StatusCode, resp.Close)
	}
	var page memory.ListPage
	srv.do(t, req{method: "GET", path: memPath("mallory", "memories"), token: mallory}).want(t, 200).decode(t, &page)
	if len(page.Items) != 0 {
		t.Errorf("%d memories stored from a body that never arrived", len(page.Items))
	}
}

// TestNonReadingClientReleasesItsSlot: three clients ask for a 10 MB
// message list (the runtime's cap raised to 16 MiB) and never read it.
// Before, there was no write deadline: each handler stayed blocked in
// Write, long after the request timeout, holding its slot and its answer
// for as long as the connection lived. Now the service gives up writing at
// the write deadline (body timeout + request timeout + 10 s): every slot
// is released.
func TestNonReadingClientReleasesItsSlot(t *testing.T) {
	const clients = 3
	tn := newTenant(t)
	cfg := testConfig(tn.schema)
	cfg.MaxResponseBytes = 16 << 20
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: cfg,
		args: []string{"--request-timeout=15s", "--body-timeout=2s"}})
	// 360 messages through the API, then each made 30,000 bytes in the
	// table: 10.8 MB, far more than the socket buffers of a connection
	// hold. (Appending that much through the API runs the guard over every
	// byte, minutes under -race, and is not what is tested.)
	srv.do(t, req{method: "POST", path: memPath("mallory", "sessions"), body: map[string]any{"id": "big"}}).want(t, 201)
	for a := range 12 {
		msgs := make([]map[string]any, 30)
		for i := range msgs {
			msgs[i] = map[string]any{"role": "user", "content": fmt.Sprintf("line %d.%d", a, i)}
		}
		srv.do(t, req{method: "POST", path: sessPath("mallory", "big", "messages"), body: map[string]any{"messages": msgs}}).want(t, 201)
	}
	if _, err := tn.admin.Exec(testCtx(t), `UPDATE `+tn.schema+`.messages SET content = rpad(content || ' ', 30000, 'tool output ')`); err != nil {
		t.Fatalf("growing the messages: %v", err)
	}

	host := strings.TrimPrefix(srv.base, "http://")
	for range clients {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		if _, err := fmt.Fprintf(c, "GET %s?last=1000 HTTP/1.1\r\nHost: engram\r\nAuthorization: Bearer %s\r\n\r\n", sessPath("mallory", "big", "messages"), srv.token); err != nil {
			t.Fatal(err)
		}
	}
	if !waitUntil(60*time.Second, func() bool { return inflight(t, srv) == clients }) {
		t.Fatalf("the %d requests never held a slot together (%d held): the answers were not blocked", clients, inflight(t, srv))
	}
	// Bounded wait, far past the write deadline of 27 s: the slots must come back.
	if !waitUntil(90*time.Second, func() bool { return inflight(t, srv) == 0 }) {
		t.Fatalf("%d slots still held 90 s after %d clients stopped reading their answers (request timeout 15 s)", inflight(t, srv), clients)
	}
	// The service serves on.
	srv.do(t, req{method: "GET", path: sessPath("mallory", "big")}).want(t, 200)
}
