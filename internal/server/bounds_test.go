package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-dev/engram/internal/memory"
)

// Issue 26: no window, message list, expansion, history search or context
// answer exceeds its budget by more than one message, nor the runtime's
// byte cap (1 MiB by default). The answers are decoded into the local
// types below, so these tests also run against a service that does not
// know the fields (and fail there).

type boundedMessage struct {
	Seq     int64  `json:"seq"`
	Role    string `json:"role"`
	Content string `json:"content"`
	Tokens  int    `json:"tokens"`
}

// truncation are the fields every bounded answer carries.
type truncation struct {
	Truncated   bool  `json:"truncated"`
	Omitted     int   `json:"omitted"`
	OmittedFrom int64 `json:"omittedFrom"`
	OmittedTo   int64 `json:"omittedTo"`
}

type boundedWindow struct {
	Tokens              int  `json:"tokens"`
	FreshTailOverBudget bool `json:"freshTailOverBudget"`
	Items               []struct {
		Kind    string          `json:"kind"`
		Message *boundedMessage `json:"message"`
	} `json:"items"`
	truncation
}

type boundedPage struct {
	Items []boundedMessage `json:"items"`
	truncation
}

type boundedExpansion struct {
	Messages []boundedMessage `json:"messages"`
	Tokens   int              `json:"tokens"`
	truncation
}

// longTurnContent is a message of about 850 bytes whose JSON is about
// 1.5 KB (< and > are escaped as \u003c and \u003e): 3,001 of them are
// 4.5 MB of JSON, 1,000 of them more than the default cap.
func longTurnContent(i int) string {
	return fmt.Sprintf("step %d: ", i) + strings.Repeat("<tool output> ", 60)
}

// seedLongTurn is issue 26's reproduction: one user message, then n
// assistant messages in appends of 50, each under the per-request limit.
func seedLongTurn(t *testing.T, srv *testServer, owner, id string, n int) {
	t.Helper()
	srv.do(t, req{method: "POST", path: memPath(owner, "sessions"), body: map[string]any{"id": id}}).want(t, 201)
	srv.do(t, req{method: "POST", path: sessPath(owner, id, "messages"), body: map[string]any{"messages": []map[string]any{
		{"role": "user", "content": "Run the whole migration and report every step."},
	}}}).want(t, 201)
	for done := 0; done < n; done += 50 {
		msgs := make([]map[string]any, min(50, n-done))
		for i := range msgs {
			msgs[i] = map[string]any{"role": "assistant", "content": longTurnContent(done + i)}
		}
		srv.do(t, req{method: "POST", path: sessPath(owner, id, "messages"), body: map[string]any{"messages": msgs}}).want(t, 201)
	}
}

// wantRange fails unless tr names the seq range [from, to).
func wantRange(t *testing.T, what string, tr truncation, from, to int64) {
	t.Helper()
	if !tr.Truncated || tr.OmittedFrom != from || tr.OmittedTo != to || int64(tr.Omitted) != to-from {
		t.Errorf("%s: %+v, want truncated with the seq range [%d, %d)", what, tr, from, to)
	}
}

// readRange reads [from, to) through the message list, page after page
// (each within capBytes), following the omitted range each page names.
func readRange(t *testing.T, srv *testServer, owner, id string, from, to int64, capBytes int) []boundedMessage {
	t.Helper()
	var out []boundedMessage
	for pages := 0; from < to; pages++ {
		r := srv.do(t, req{method: "GET", path: sessPath(owner, id, "messages") + fmt.Sprintf("?from=%d&to=%d", from, to)}).want(t, 200)
		if len(r.body) > capBytes {
			t.Fatalf("message page of %d bytes, over the cap of %d", len(r.body), capBytes)
		}
		var p boundedPage
		r.decode(t, &p)
		if len(p.Items) == 0 || p.Items[0].Seq != from || pages > int(to-from) {
			t.Fatalf("the page from %d makes no progress: %d items, %+v", from, len(p.Items), p.truncation)
		}
		out = append(out, p.Items...)
		next := p.Items[len(p.Items)-1].Seq + 1
		if next < to {
			wantRange(t, "message page", p.truncation, next, to)
		} else if p.Truncated {
			t.Fatalf("the last page says truncated: %+v", p.truncation)
		}
		from = next
	}
	return out
}

// compactRoot is a root of the session's summary DAG after a full
// compaction, with the seq range it covers.
type compactRoot struct {
	ID          string `json:"id"`
	EarliestSeq int64  `json:"earliestSeq"`
	LatestSeq   int64  `json:"latestSeq"`
}

// TestLongTurnAnswersBounded is issue 26's reproduction and what follows
// from it, on one session through the running service: one user message
// and 3,000 assistant messages appended 50 at a time (4.5 MB of JSON).
// Each subtest is one point of the issue: a window of budget 1 is the
// newest message with the 3,000 others named as left out; every answer
// whose budget would hold megabytes stays within the default byte cap of
// 1 MiB and names what it left out; the MCP tools do the same, each whole
// tool result within the cap. The answers are decoded into this file's own
// types, so the test runs (and fails) against a service without the fields.
// (Expansions, history search and context under a cap are
// TestRuntimeByteCapBoundsEveryAnswer's, on a smaller session: compacting
// 3,000 messages of this size takes minutes under -race.)
func TestLongTurnAnswersBounded(t *testing.T) {
	tn := newTenant(t)
	// A policy that allows the long turn (the default maxTurnMessages of
	// 500 would refuse it): the answers must be bounded whatever the
	// policy lets a session hold.
	cfg := testConfig(tn.schema)
	cfg.Policy.Conversation.Limits.MaxTurnMessages = 10000
	cfg.Policy.Conversation.Limits.MaxTurnTokens = 1000000
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: cfg,
		args: []string{"--request-timeout=2m"}}) // appends of 50 under -race on a busy machine
	seedLongTurn(t, srv, "ann", "long", 3000)
	t.Run("WindowFreshTailBoundedByBudget", func(t *testing.T) { testWindowFreshTailBoundedByBudget(t, srv) })
	t.Run("AnswersBoundedByByteCap", func(t *testing.T) { testAnswersBoundedByByteCap(t, srv) })
	t.Run("MCPWindowTruncated", func(t *testing.T) { testMCPWindowTruncated(t, srv) })
}

// testWindowFreshTailBoundedByBudget: a token window of budget 1 is the
// newest message alone (one message over the budget at most), says it is
// truncated and names the 3,000 messages it left out, which the message
// list then reads back, every page within the default byte cap.
func testWindowFreshTailBoundedByBudget(t *testing.T, srv *testServer) {
	r := srv.do(t, req{method: "POST", path: sessPath("ann", "long", "window"), body: map[string]any{"strategy": "token", "budget": 1}}).want(t, 200)
	if len(r.body) > 16<<10 {
		t.Fatalf("a window of budget 1 is %d bytes", len(r.body))
	}
	var w boundedWindow
	r.decode(t, &w)
	if len(w.Items) != 1 || w.Items[0].Message == nil || w.Items[0].Message.Seq != 3001 || !w.FreshTailOverBudget {
		t.Fatalf("window of budget 1 holds %d items (over budget %v), want the newest message alone", len(w.Items), w.FreshTailOverBudget)
	}
	wantRange(t, "window of budget 1", w.truncation, 1, 3001)

	omitted := readRange(t, srv, "ann", "long", w.OmittedFrom, w.OmittedTo, 1<<20)
	if len(omitted) != 3000 || omitted[0].Role != "user" || omitted[2999].Seq != 3000 {
		t.Fatalf("read back %d of the 3,000 messages left out", len(omitted))
	}
}

// testAnswersBoundedByByteCap: the answers whose budget would hold
// megabytes — a window of the largest budget, the message list, the last
// 1,000 messages — stay within the default byte cap of 1 MiB and say what
// they left out.
func testAnswersBoundedByByteCap(t *testing.T, srv *testServer) {
	const capBytes = 1 << 20
	get := getWithin(t, srv, capBytes)

	var w boundedWindow
	get("window of budget 1,000,000", req{method: "POST", path: sessPath("ann", "long", "window"), body: map[string]any{"strategy": "token", "budget": 1000000}}, &w)
	if len(w.Items) < 100 || w.Items[len(w.Items)-1].Message.Seq != 3001 {
		t.Fatalf("window of the largest budget holds %d items", len(w.Items))
	}
	wantRange(t, "window of the largest budget", w.truncation, 1, w.Items[0].Message.Seq)

	var page boundedPage
	get("message list", req{method: "GET", path: sessPath("ann", "long", "messages")}, &page)
	if len(page.Items) < 100 || page.Items[0].Seq != 1 {
		t.Fatalf("message list holds %d items", len(page.Items))
	}
	wantRange(t, "message list", page.truncation, page.Items[len(page.Items)-1].Seq+1, 3002)

	var last boundedPage
	get("last 1000", req{method: "GET", path: sessPath("ann", "long", "messages") + "?last=1000"}, &last)
	if len(last.Items) < 100 || last.Items[len(last.Items)-1].Seq != 3001 {
		t.Fatalf("last=1000 holds %d items", len(last.Items))
	}
	wantRange(t, "last 1000", last.truncation, 2002, last.Items[0].Seq)
}

// compactLargest compacts a session (fully, forced) and returns its
// largest root.
func compactLargest(t *testing.T, srv *testServer, owner, id string) compactRoot {
	t.Helper()
	var comp struct {
		Roots []compactRoot `json:"roots"`
	}
	srv.do(t, req{method: "POST", path: sessPath(owner, id, "compact"), body: map[string]any{"mode": "full", "force": true}}).want(t, 200).decode(t, &comp)
	if len(comp.Roots) == 0 {
		t.Fatal("compaction made no summary")
	}
	best := comp.Roots[0]
	for _, r := range comp.Roots {
		if r.LatestSeq-r.EarliestSeq > best.LatestSeq-best.EarliestSeq {
			best = r
		}
	}
	return best
}

// countingTransport records the size of every response body.
type countingTransport struct {
	next    http.RoundTripper
	mu      sync.Mutex
	largest int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.largest = max(c.largest, len(body))
	c.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// take returns the largest body since the last call.
func (c *countingTransport) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.largest
	c.largest = 0
	return n
}

// mcpWithinCap connects an MCP client with the server's admin token and
// returns a tool caller that fails the test when a whole result (the HTTP
// response body) is over capBytes.
func mcpWithinCap(t *testing.T, srv *testServer, capBytes int) func(tool string, args map[string]any, out any) {
	t.Helper()
	counter := &countingTransport{next: &bearerTransport{token: srv.token, next: http.DefaultTransport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "engram-test", Version: "v0"}, nil)
	session, err := client.Connect(testCtx(t), &mcp.StreamableClientTransport{
		Endpoint: srv.base + "/mcp", HTTPClient: &http.Client{Transport: counter}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return func(tool string, args map[string]any, out any) {
		t.Helper()
		counter.take()
		callTool(t, session, tool, args, out)
		if n := counter.take(); n > capBytes {
			t.Fatalf("%s: a result of %d bytes, over the cap of %d", tool, n, capBytes)
		}
	}
}

// testMCPWindowTruncated: the MCP tools give the same bounded answers,
// with the same fields, and a whole tool result (the answer twice: the
// structured content and its text) stays within the default byte cap of
// 1 MiB: get_window of budget 1 is the newest message with the range left
// out; get_window of the largest budget, search_history and get_context
// stay within the cap.
func testMCPWindowTruncated(t *testing.T, srv *testServer) {
	call := mcpWithinCap(t, srv, 1<<20)

	var w boundedWindow
	call("get_window", map[string]any{"owner": "ann", "session": "long", "strategy": "token", "budget": 1}, &w)
	if len(w.Items) != 1 || w.Items[0].Message.Seq != 3001 {
		t.Fatalf("get_window of budget 1 holds %d items", len(w.Items))
	}
	wantRange(t, "get_window of budget 1", w.truncation, 1, 3001)
	call("get_window", map[string]any{"owner": "ann", "session": "long", "strategy": "token", "budget": 1000000}, &w)
	wantRange(t, "get_window of the largest budget", w.truncation, 1, w.Items[0].Message.Seq)

	var hits struct {
		Results []struct {
			Seq int64 `json:"seq"`
		} `json:"results"`
		Truncated bool `json:"truncated"`
	}
	call("search_history", map[string]any{"owner": "ann", "query": "tool output step"}, &hits)
	if len(hits.Results) == 0 {
		t.Fatal("search_history found nothing")
	}
	var ctxRes struct {
		Text      string `json:"text"`
		Truncated bool   `json:"truncated"`
	}
	call("get_context", map[string]any{"owner": "ann", "maxTokens": 32000}, &ctxRes)
}

// TestRuntimeByteCapBoundsEveryAnswer: a runtime's maxResponseBytes (here
// the smallest allowed, 64 KiB) bounds every answer of its service, each
// saying what it left out: over REST the window, the message list, the
// expansion of a summary, the history search and the context; over MCP
// the whole result of get_window, expand_summary, search_history and
// get_context.
func TestRuntimeByteCapBoundsEveryAnswer(t *testing.T) {
	tn := newTenant(t)
	cfg := testConfig(tn.schema)
	cfg.MaxResponseBytes = memory.MinMaxResponseBytes
	const capBytes = memory.MinMaxResponseBytes
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: cfg, args: []string{"--request-timeout=2m"}})
	seedLongTurn(t, srv, "ann", "s", 150) // 151 messages, about 230 KB of JSON
	for i := range 3 {                    // three short turns: the fresh tail, so the long turn can be compacted
		srv.do(t, req{method: "POST", path: sessPath("ann", "s", "messages"), body: turn(i, "release")}).want(t, 201)
	}
	// 20 messages whose snippets are about 3 KB of JSON each.
	srv.do(t, req{method: "POST", path: memPath("ann", "sessions"), body: map[string]any{"id": "h"}}).want(t, 201)
	heavy := make([]map[string]any, 20)
	for i := range heavy {
		heavy[i] = map[string]any{"role": "user", "content": fmt.Sprintf("needle %d ", i) + strings.Repeat("<>", 300)}
	}
	srv.do(t, req{method: "POST", path: sessPath("ann", "h", "messages"), body: map[string]any{"messages": heavy}}).want(t, 201)
	for i := range 40 { // 40 memories, about 100 KB of JSON rendered
		srv.do(t, req{method: "POST", path: memPath("ann", "memories"), body: map[string]any{"category": "project",
			"content": fmt.Sprintf("Release step %d uses tool%d on server%d in region%d ", i, i, i, i) + strings.Repeat("&", 400)}}).want(t, 201)
	}
	get := getWithin(t, srv, capBytes)

	var w boundedWindow
	get("window", req{method: "POST", path: sessPath("ann", "s", "window"), body: map[string]any{"strategy": "token", "budget": 1000000}}, &w)
	wantRange(t, "window", w.truncation, 1, w.Items[0].Message.Seq)
	var page boundedPage
	get("message list", req{method: "GET", path: sessPath("ann", "s", "messages")}, &page)
	wantRange(t, "message list", page.truncation, page.Items[len(page.Items)-1].Seq+1, 158)
	if got := readRange(t, srv, "ann", "s", 1, 158, capBytes); len(got) != 157 {
		t.Fatalf("read %d of 157 messages page by page", len(got))
	}
	root := compactLargest(t, srv, "ann", "s")
	var exp boundedExpansion
	get("expansion", req{method: "GET", path: memPath("ann", "summaries", root.ID, "expand") + "?maxTokens=1000000"}, &exp)
	if len(exp.Messages) == 0 || exp.Messages[0].Seq != root.EarliestSeq {
		t.Fatalf("expansion of %d..%d holds %d messages", root.EarliestSeq, root.LatestSeq, len(exp.Messages))
	}
	wantRange(t, "expansion", exp.truncation, exp.Messages[len(exp.Messages)-1].Seq+1, root.LatestSeq+1)
	var hits struct {
		Results   []json.RawMessage `json:"results"`
		Truncated bool              `json:"truncated"`
		Omitted   int               `json:"omitted"`
	}
	get("history search", req{method: "POST", path: memPath("ann", "history", "search"), body: map[string]any{"query": "needle"}}, &hits)
	if len(hits.Results) == 0 {
		t.Fatal("history search found nothing")
	}
	var c struct {
		IDs       []string `json:"ids"`
		Omitted   int      `json:"omitted"`
		Truncated bool     `json:"truncated"`
	}
	get("context", req{method: "POST", path: memPath("ann", "context"), body: map[string]any{"maxTokens": 32000}}, &c)
	if !c.Truncated || c.Omitted == 0 || len(c.IDs) == 0 {
		t.Fatalf("context within 64 KiB: %d ids, %d omitted, truncated %v", len(c.IDs), c.Omitted, c.Truncated)
	}

	call := mcpWithinCap(t, srv, capBytes)
	call("get_window", map[string]any{"owner": "ann", "session": "s", "strategy": "token", "budget": 1000000}, &w)
	wantRange(t, "get_window", w.truncation, 1, w.Items[0].Message.Seq)
	call("expand_summary", map[string]any{"owner": "ann", "id": root.ID, "maxTokens": 1000000}, &exp)
	wantRange(t, "expand_summary", exp.truncation, exp.Messages[len(exp.Messages)-1].Seq+1, root.LatestSeq+1)
	call("search_history", map[string]any{"owner": "ann", "query": "needle"}, &hits)
	if !hits.Truncated || hits.Omitted == 0 || len(hits.Results)+hits.Omitted != 20 {
		t.Errorf("search_history within a third of 64 KiB: %d results, %d omitted, truncated %v", len(hits.Results), hits.Omitted, hits.Truncated)
	}
	call("get_context", map[string]any{"owner": "ann", "maxTokens": 32000}, &c)
	if !c.Truncated || c.Omitted == 0 {
		t.Errorf("get_context within a third of 64 KiB: %d ids, %d omitted, truncated %v", len(c.IDs), c.Omitted, c.Truncated)
	}
}

// getWithin returns a function that sends a request, wants 200 with a body
// of at most capBytes and decodes it into v.
func getWithin(t *testing.T, srv *testServer, capBytes int) func(what string, r req, v any) {
	return func(what string, r req, v any) {
		t.Helper()
		resp := srv.do(t, r).want(t, 200)
		if len(resp.body) > capBytes {
			t.Fatalf("%s: %d bytes, over the cap of %d", what, len(resp.body), capBytes)
		}
		resp.decode(t, v)
	}
}
