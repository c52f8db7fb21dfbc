package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/engram-dev/engram/internal/memory"
)

// Screenshots of the console for docs/console.md: the test writes them to
// $ENGRAM_ARTIFACTS/console (or a temporary directory), and with
// ENGRAM_UPDATE_DOCS_IMAGES=1 also copies them to docs/images.
const (
	artifactsEnv    = "ENGRAM_ARTIFACTS"
	updateImagesEnv = "ENGRAM_UPDATE_DOCS_IMAGES"
)

// stepTimeout bounds every browser step: a wait that never ends fails the
// test with the step's name instead of hanging the suite.
const stepTimeout = 20 * time.Second

// consoleSeed is what the browser test finds in the service.
type consoleSeed struct {
	owner                     string
	updated, replaced, winner string // memory ids of alice
	toDelete                  string
	session                   string
}

// seedConsole writes memories through the API (so history records real
// actors): an update with before/after, a redaction, an exact-duplicate
// merge, a supersede chain, an agent token's write, and two more owners.
func seedConsole(t *testing.T, srv *testServer) consoleSeed {
	t.Helper()
	const alice = "alice@example.com"
	add := func(owner string, body map[string]any, token string) memory.AddResult {
		t.Helper()
		var res memory.AddResult
		r := srv.do(t, req{method: "POST", path: memPath(owner, "memories"), body: body, token: token})
		if r.status != 200 && r.status != 201 {
			t.Fatalf("seeding %v: %d %s", body, r.status, r.body)
		}
		r.decode(t, &res)
		return res
	}
	coffee := add(alice, map[string]any{"content": "Alice prefers dark roast coffee", "category": "preference", "source": "user"}, "")
	srv.do(t, req{method: "PATCH", path: memPath(alice, "memories", coffee.Memory.ID),
		body: map[string]any{"content": "Alice prefers medium roast coffee, no sugar", "importance": 8, "source": "user"}}).want(t, 200)
	add(alice, map[string]any{"content": "Alice deploys staging with token=s3cr3t-staging-key-123", "category": "project"}, "")
	marathon := add(alice, map[string]any{"content": "Alice is training for a marathon in spring", "category": "project", "importance": 6}, "")
	if again := add(alice, map[string]any{"content": "Alice is training for a marathon in spring", "category": "project"}, ""); again.Action != memory.ActionMerged {
		t.Fatalf("the exact duplicate was %s, want merged", again.Action)
	}
	lisbon := add(alice, map[string]any{"content": "Alice lives in Lisbon", "category": "identity", "source": "user"}, "")
	porto := add(alice, map[string]any{"content": "Alice moved to Porto in 2026", "category": "identity", "source": "user"}, "")
	srv.do(t, req{method: "POST", path: memPath(alice, "memories", lisbon.Memory.ID, "supersede"),
		body: map[string]any{"by": porto.Memory.ID, "source": "user"}}).want(t, 200)
	var minted struct{ Token string }
	srv.do(t, req{method: "POST", path: "/v1/tokens", body: map[string]any{"owner": alice, "subject": "support-bot"}}).want(t, 201).decode(t, &minted)
	add(alice, map[string]any{"content": "Alice asked for vegetarian recipes with coffee desserts", "category": "contextual"}, minted.Token)

	// Markup in content is data: the console must show it as text.
	add(alice, map[string]any{"content": `Alice pasted <img src=x onerror="document.title='pwned'"> into the chat`, "category": "contextual"}, "")
	session := seedConversation(t, srv, alice)
	add("bob", map[string]any{"content": "Bob works night shifts", "category": "contextual"}, "")
	add("bob", map[string]any{"content": "Bob is allergic to cats", "category": "identity", "source": "user"}, "")
	add("mallory", map[string]any{"content": "Mallory asked to be forgotten", "category": "contextual"}, "")
	add("mallory", map[string]any{"content": "Mallory uses the night bus", "category": "contextual"}, "")
	return consoleSeed{owner: alice, updated: coffee.Memory.ID, replaced: lisbon.Memory.ID, winner: porto.Memory.ID, toDelete: marathon.Memory.ID, session: session}
}

// seedConversation writes a session of 45 turns and compacts it (the
// extractive summarizer: the test runtime has no LLM), so it has leaf
// summaries and a condensed one above them.
func seedConversation(t *testing.T, srv *testServer, owner string) string {
	t.Helper()
	const id = "support-2026-11-23"
	srv.do(t, req{method: "POST", path: memPath(owner, "sessions"), body: map[string]any{"id": id, "title": "Coffee subscription help"}}).want(t, 201)
	for i := 1; i <= 45; i++ {
		srv.do(t, req{method: "POST", path: memPath(owner, "sessions", id, "messages"), body: map[string]any{"messages": []map[string]any{
			{"role": "user", "content": fmt.Sprintf("Question %d: can my coffee delivery %d move to Friday?", i, i)},
			{"role": "assistant", "content": fmt.Sprintf("Answer %d: delivery %d now arrives on Friday mornings.", i, i)},
		}}}).want(t, 201)
	}
	srv.do(t, req{method: "POST", path: memPath(owner, "sessions", id, "compact"), body: map[string]any{"mode": "full", "force": true}}).want(t, 200)
	return id
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// service started the way `manager serve` starts, on PostgreSQL: a wrong
// token is refused, sign-in, owners, search with the score breakdown, a
// history timeline, the context preview, deleting a memory, erasing an
// owner after typing its id. The page must raise no CSP violation or
// script error, and the token must appear in no URL and no server log.
func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t) // first: a missing browser fails (or skips) before any setup
	_, srv := newServedTenant(t)
	seed := seedConsole(t, srv)
	ui := srv.base + "/ui/"
	aliceHash := "#/o/" + strings.ReplaceAll(seed.owner, "@", "%40")

	// A wrong token is refused and not kept.
	const wrong = "engram_thisTokenIsNotInTheTokensFileAtAll0000000000000"
	b.do("open the console", chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.do("sign in with a wrong token",
		chromedp.SendKeys(chromedp.CSS("#token"), wrong),
		chromedp.Click(chromedp.CSS(`#sign-in button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#sign-in-error p")))
	if msg := b.text("#sign-in-error p"); !strings.Contains(msg, "refused") {
		t.Fatalf("wrong token: %q, want a refusal", msg)
	}
	if kept := eval[bool](b, `sessionStorage.length > 0`); kept {
		t.Fatal("a refused token was stored")
	}
	b.screenshot("signin-refused")

	// Sign in: the owners page lists every owner with its counts.
	b.do("sign in",
		chromedp.SendKeys(chromedp.CSS("#token"), srv.token),
		chromedp.Click(chromedp.CSS(`#sign-in button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#owners table")))
	owners := b.text("#owners table")
	for _, o := range []string{seed.owner, "bob", "mallory"} {
		if !strings.Contains(owners, o) {
			t.Fatalf("owners page %q does not list %s", owners, o)
		}
	}
	if href := eval[string](b, `location.href`); strings.Contains(href, srv.token) {
		t.Fatalf("the token is in the URL %s", href)
	}
	if eval[string](b, `sessionStorage.getItem('engram.console.token')`) != srv.token || eval[string](b, `document.cookie`) != "" || eval[int](b, `localStorage.length`) != 0 {
		t.Fatal("the token must be in sessionStorage only")
	}
	if id := eval[string](b, `document.activeElement.id`); id != "page-title" {
		t.Fatalf("after sign-in the focus is on %q, want the page title", id)
	}
	b.do("skip link", chromedp.Evaluate[chromedp.Void](`document.querySelector('a.skip').click()`))
	if id, hash := eval[string](b, `document.activeElement.id`), eval[string](b, `location.hash`); id != "main" || hash != "#/owners" {
		t.Fatalf("the skip link moved focus to %q and the address to %q, want main and #/owners", id, hash)
	}
	b.screenshot("owners")

	// An owner's memories, opened with the keyboard; then the filters.
	b.do("open alice with the keyboard",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#owners a[href="`+aliceHash+`"]').focus()`),
		chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#memories table")))
	if id := eval[string](b, `document.activeElement.id`); id != "page-title" {
		t.Fatalf("after navigating the focus is on %q, want the page title", id)
	}
	list := b.text("#memories table")
	if !strings.Contains(list, "medium roast") || !strings.Contains(list, "[REDACTED") || strings.Contains(list, "Lisbon") {
		t.Fatalf("alice's active memories: %q", list)
	}
	if !strings.Contains(list, `<img src=x onerror=`) || eval[int](b, `document.querySelectorAll('#memories img').length`) != 0 || eval[string](b, `document.title`) == "pwned" {
		t.Fatal("markup in a memory's content was rendered as markup, not shown as text")
	}
	b.screenshot("memories")
	consoleFilters(t, b, srv, seed.owner)
	b.do("filter inactive",
		chromedp.SetValue(chromedp.CSS(`#filters select[name="state"]`), "inactive"),
		chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)))
	b.until("the inactive filter shows the superseded memory", `(document.querySelector('#memories')||{}).textContent.includes('Lisbon')`)
	if l := b.text("#memories"); strings.Contains(l, "medium roast") || !strings.Contains(l, "superseded") {
		t.Fatalf("inactive filter: %q", l)
	}
	b.do("filter a category",
		chromedp.SetValue(chromedp.CSS(`#filters select[name="state"]`), "active"),
		chromedp.SendKeys(chromedp.CSS(`#filters input[name="category"]`), "preference"),
		chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)))
	// The inactive page had one row too: wait for the coffee preference itself.
	b.until("the category filter applies", `[...document.querySelectorAll('#memories tbody tr')].map(r => r.textContent).join('|').includes('medium roast')`)
	if n := eval[int](b, `document.querySelectorAll('#memories tbody tr').length`); n != 1 {
		t.Fatalf("category preference lists %d memories, want 1", n)
	}

	// Search shows each result's score with its vector, text and decay parts.
	b.do("search",
		chromedp.Click(chromedp.CSS(`nav.subnav a[href$="/search"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#search-form input[name="query"]`)),
		chromedp.SendKeys(chromedp.CSS(`#search-form input[name="query"]`), "coffee"),
		chromedp.Click(chromedp.CSS(`#search-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#results tr.hit")))
	if first := b.text("#results tr.hit td.content"); !strings.Contains(first, "coffee") {
		t.Fatalf("best hit for coffee: %q", first)
	}
	var parts []float64
	for _, kind := range []string{"score", "vector", "text", "decay"} {
		s := b.text(`#results tr.hit td.score[data-kind="` + kind + `"] .value`)
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || v < 0 || v > 1 {
			t.Fatalf("%s score %q of the best hit is not a number in [0, 1]", kind, s)
		}
		parts = append(parts, v)
	}
	if parts[1] <= 0 || parts[2] <= 0 || parts[3] <= 0 {
		t.Fatalf("best hit for coffee: vector %.3f text %.3f decay %.3f, want all three above 0", parts[1], parts[2], parts[3])
	}
	b.screenshot("search")
	b.do("search with a filter",
		chromedp.SetValue(chromedp.CSS(`#search-form textarea[name="filter"]`), `{"metadata": {"key": "price", "gte": 100}}`),
		chromedp.Click(chromedp.CSS(`#search-form button[type="submit"]`)))
	b.until("the search filter applies", `(() => { const r = [...document.querySelectorAll('#results tr.hit')]; return r.length === 1 && r[0].textContent.includes('120 euros'); })()`)

	// History: the updated memory's timeline says who wrote what, before and after.
	b.do("history", chromedp.Evaluate[chromedp.Void](`location.hash = '`+aliceHash+`/m/`+seed.updated+`'`),
		chromedp.WaitVisible(chromedp.CSS("#timeline li")))
	tl := b.text("#timeline")
	if strings.Contains(tl, "[object") || strings.Contains(tl, "undefined") {
		t.Fatalf("the timeline renders a value wrongly: %q", tl)
	}
	for _, want := range []string{"add", "update", "dark roast", "medium roast", "test-admin", "user", "previousCategory"} {
		if !strings.Contains(tl, want) {
			t.Fatalf("timeline %q lacks %q", tl, want)
		}
	}
	b.screenshot("history")
	b.do("supersede chain", chromedp.Evaluate[chromedp.Void](`location.hash = '`+aliceHash+`/m/`+seed.replaced+`'`),
		chromedp.WaitVisible(chromedp.CSS("ol.chain a")))
	if chain := b.text("ol.chain"); !strings.Contains(chain, "Porto") {
		t.Fatalf("the supersede chain of the Lisbon memory: %q", chain)
	}

	// Context preview: moving the budget slider re-renders within it.
	b.do("context", chromedp.Click(chromedp.CSS(`nav.subnav a[href$="/context"]`)), chromedp.WaitVisible(chromedp.CSS("#context-summary")))
	b.until("the preview renders", `document.querySelector('#context-summary').textContent.includes('of 1000 tokens')`)
	b.do("move the slider", chromedp.Evaluate[chromedp.Void](`(() => { const r = document.querySelector('#context-form input[type=range]'); r.value = 50; r.dispatchEvent(new Event('input')); })()`))
	b.until("the preview follows the slider", `document.querySelector('#context-summary').textContent.includes('of 50 tokens')`)
	b.do("back to 1000", chromedp.Evaluate[chromedp.Void](`(() => { const r = document.querySelector('#context-form input[type=range]'); r.value = 1000; r.dispatchEvent(new Event('input')); })()`))
	b.until("the preview follows the slider back", `document.querySelector('#context-summary').textContent.includes('of 1000 tokens')`)
	b.screenshot("context")

	// Sessions: the list, a session's summary tree, a condensed summary's
	// children, and a summary expanded back to its messages.
	b.do("sessions", chromedp.Click(chromedp.CSS(`nav.subnav a[href$="/sessions"]`)), chromedp.WaitVisible(chromedp.CSS("#sessions table")))
	if l := b.text("#sessions table"); !strings.Contains(l, "Coffee subscription help") || !strings.Contains(l, "90") {
		t.Fatalf("sessions page: %q", l)
	}
	b.screenshot("sessions")
	b.do("open the session", chromedp.Click(chromedp.CSS(`#sessions a[href$="/s/`+seed.session+`"]`)), chromedp.WaitVisible(chromedp.CSS("#summary-tree li.summary")))
	condensed := `#summary-tree > li.summary:not([data-depth="0"])`
	b.do("children of a condensed summary", chromedp.Click(chromedp.CSS(condensed+` button.children`)),
		chromedp.WaitVisible(chromedp.CSS(condensed+` .kids li.summary[data-depth="0"]`)))
	if n := eval[int](b, `document.querySelectorAll('`+condensed+` .kids li.summary').length`); n < 2 {
		t.Fatalf("the condensed summary shows %d children, want at least 2", n)
	}
	if got := eval[string](b, `document.querySelector('`+condensed+` button.children').getAttribute('aria-expanded')`); got != "true" {
		t.Fatalf("aria-expanded of the opened node = %q", got)
	}
	b.do("expand a summary", chromedp.Click(chromedp.CSS(condensed+` .kids li.summary button.expand`)),
		chromedp.WaitVisible(chromedp.CSS(condensed+` .kids .expansion ol.messages li`)))
	first := b.text(condensed + ` .kids .expansion ol.messages li`)
	if !strings.Contains(first, "Question 1: can my coffee delivery 1 move to Friday?") {
		t.Fatalf("the first leaf expands to %q, want the first message verbatim", first)
	}
	if l := b.text("#messages"); !strings.Contains(l, "Answer 45: delivery 45 now arrives on Friday mornings.") {
		t.Fatalf("the session's latest messages: %q", l)
	}
	b.screenshotAt("session", "#tree-h")

	// Delete a memory after the confirmation; cancelling first deletes nothing.
	row := `#memories tr[data-id="` + seed.toDelete + `"]`
	b.do("memories again", chromedp.Click(chromedp.CSS(`nav.subnav a[href="`+aliceHash+`"]`)), chromedp.WaitVisible(chromedp.CSS(row)))
	b.do("delete, then Escape", chromedp.Click(chromedp.CSS(row+` button.danger`)), chromedp.WaitVisible(chromedp.CSS("dialog.confirm")),
		chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.CSS("dialog.confirm")),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if id := eval[string](b, `document.activeElement.closest('tr') ? document.activeElement.closest('tr').dataset.id : ''`); id != seed.toDelete {
		t.Fatalf("after cancelling, the focus is in row %q, want back on the Delete button of %s", id, seed.toDelete)
	}
	b.do("delete, then Cancel", chromedp.Click(chromedp.CSS(row+` button.danger`)), chromedp.WaitVisible(chromedp.CSS("dialog.confirm")),
		chromedp.Click(chromedp.CSS(`dialog.confirm button[value="cancel"]`)), chromedp.WaitNotPresent(chromedp.CSS("dialog.confirm")),
		chromedp.WaitVisible(chromedp.CSS(row)))
	b.do("delete", chromedp.Click(chromedp.CSS(row+` button.danger`)), chromedp.WaitVisible(chromedp.CSS("dialog.confirm")))
	if focused := eval[string](b, `document.activeElement.textContent`); focused != "Cancel" {
		t.Fatalf("the confirmation focuses %q, want Cancel (the safe choice)", focused)
	}
	b.screenshot("delete-confirm")
	b.do("confirm the deletion", chromedp.Click(chromedp.CSS(`dialog.confirm button[value="ok"]`)), chromedp.WaitNotPresent(chromedp.CSS(row)))
	b.until("the deletion is announced", `document.getElementById('status').textContent === 'Memory deleted.'`)
	var gone memory.Memory
	srv.do(t, req{method: "GET", path: memPath(seed.owner, "memories", seed.toDelete)}).want(t, 200).decode(t, &gone)
	if gone.Active {
		t.Fatal("the memory deleted in the console is still active")
	}

	// Erase an owner: the button works only once the owner id is typed.
	b.do("erase page", chromedp.Evaluate[chromedp.Void](`location.hash = '#/o/mallory/erase'`), chromedp.WaitVisible(chromedp.CSS("#erase-form")),
		chromedp.SendKeys(chromedp.CSS(`#erase-form input[name="confirm"]`), "mallor"))
	if !eval[bool](b, `document.querySelector('#erase-form button[type=submit]').disabled`) {
		t.Fatal("the erase button is enabled before the owner id is typed in full")
	}
	b.do("type the owner id", chromedp.SendKeys(chromedp.CSS(`#erase-form input[name="confirm"]`), "y"))
	b.until("the erase button is enabled", `!document.querySelector('#erase-form button[type=submit]').disabled`)
	b.screenshot("erase")
	b.do("erase", chromedp.Click(chromedp.CSS(`#erase-form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("#owners table")))
	b.until("the erasure is announced", `document.getElementById('status').textContent.startsWith('Erased mallory: 2 memories')`)
	if o := b.text("#owners table"); strings.Contains(o, "mallory") || !strings.Contains(o, "bob") {
		t.Fatalf("owners after erasing mallory: %q", o)
	}
	var after memory.OwnersPage
	srv.do(t, req{method: "GET", path: "/v1/owners"}).want(t, 200).decode(t, &after)
	for _, o := range after.Items {
		if o.Owner == "mallory" {
			t.Fatal("mallory is still listed by the API after the erasure")
		}
	}

	// Signing out forgets the token.
	b.do("sign out", chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("#token")))
	if eval[int](b, `sessionStorage.length`) != 0 {
		t.Fatal("signing out left the token in sessionStorage")
	}

	b.mu.Lock()
	problems := append([]string(nil), b.problems...)
	b.mu.Unlock()
	for _, p := range problems {
		t.Errorf("the page reported: %s", p)
	}
	logs := srv.logs.String()
	for _, secret := range []string{srv.token, wrong} {
		if strings.Contains(logs, secret) {
			t.Fatal("a token is in the server log")
		}
	}
	if !strings.Contains(logs, `"route":"GET /ui/"`) || !strings.Contains(logs, `"route":"GET /v1/owners"`) {
		t.Fatal("the access log does not show the console's requests")
	}
}
