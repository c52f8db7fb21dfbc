package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// Issue 26's hostile review found answers outside the runtime's byte cap:
// the profile changelog (25 MB after 500 writes across 5 agent ids), a
// memory's history (3.3 MB after 1,000 PATCHes, never pruned) and the
// memory list (1.7 MB for 500 memories of text JSON escapes). Through REST
// at the smallest cap (64 KiB), each is now a page within the cap whose
// cursor reads every item once, and what grew without bound is bounded.
// The answers are decoded into this file's own types, so the test runs
// (and fails) against a service that does not know the fields.

// boundedList is any page of a list: its items (under "items" or
// "sessions"), its cursor and whether the cap ended it.
type boundedList struct {
	Items      []json.RawMessage `json:"items"`
	Sessions   []json.RawMessage `json:"sessions"`
	NextCursor string            `json:"nextCursor"`
	Truncated  bool              `json:"truncated"`
}

// escapeHeavyText is n bytes of text that JSON escapes to about 6n.
func escapeHeavyText(prefix string, n int) string {
	return (prefix + strings.Repeat("<&>", n))[:n]
}

// readAllPages GETs path (with its query) and then every nextCursor, each
// page within capBytes, and returns the items' key field in order. The
// first page must be cut by the cap (the list holds more than the cap).
func readAllPages(t *testing.T, srv *testServer, token, path string, capBytes int, key string) []string {
	t.Helper()
	var keys []string
	cursor := ""
	for pages := 0; ; pages++ {
		r := srv.do(t, req{method: "GET", path: withCursor(path, cursor), token: token}).want(t, http.StatusOK)
		if len(r.body) > capBytes {
			t.Fatalf("GET %s: page %d is %d bytes, over the cap of %d", path, pages, len(r.body), capBytes)
		}
		var page boundedList
		r.decode(t, &page)
		items := append(page.Items, page.Sessions...)
		if len(items) == 0 {
			t.Fatalf("GET %s: page %d is empty", path, pages)
		}
		if pages == 0 && (!page.Truncated || page.NextCursor == "") {
			t.Fatalf("GET %s: the first page (%d items) does not say the cap ended it", path, len(items))
		}
		for _, raw := range items {
			var fields map[string]any
			if err := json.Unmarshal(raw, &fields); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, fmt.Sprint(fields[key]))
		}
		if page.NextCursor == "" || pages > 1000 {
			return keys
		}
		cursor = page.NextCursor
	}
}

// wantDistinct fails unless keys holds n distinct values.
func wantDistinct(t *testing.T, what string, keys []string, n int) {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("%s: %s read twice", what, k)
		}
		seen[k] = true
	}
	if len(keys) != n {
		t.Fatalf("%s: read %d items through the pages, want %d", what, len(keys), n)
	}
}

// TestRuntimeByteCapBoundsEveryList: at a runtime cap of 64 KiB the
// changelog, a memory's history, the memory list, the search and the
// session list stay within the cap, and their cursors read everything; an
// agent cannot grow a memory's history or an owner's documents without
// bound.
func TestRuntimeByteCapBoundsEveryList(t *testing.T) {
	tn := newTenant(t)
	cfg := testConfig(tn.schema)
	cfg.MaxResponseBytes = memory.MinMaxResponseBytes
	cfg.Policy.Limits.MaxDocumentsPerOwner = 5
	cfg.Policy.Limits.MaxHistoryPerMemory = 20
	mallory := newTestToken(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: cfg, args: []string{"--request-timeout=2m"},
		tokens: []string{mallory + " role=agent owner=mallory name=mallory"}})
	t.Run("Changelog", func(t *testing.T) { testChangelogWithinCap(t, srv, mallory) })
	t.Run("DocumentsPerOwner", func(t *testing.T) { testDocumentsPerOwner(t, srv, mallory) })
	t.Run("MemoryHistory", func(t *testing.T) { testMemoryHistoryWithinCap(t, srv, mallory) })
	t.Run("MemoryListAndSearch", func(t *testing.T) { testMemoryListWithinCap(t, srv, mallory) })
	t.Run("Sessions", func(t *testing.T) { testSessionsWithinCap(t, srv, mallory) })
}

// testChangelogWithinCap: the review's changelog, smaller: 5 agent ids × 6
// profile writes of 2,000 bytes that JSON escapes (720 KB of changelog).
func testChangelogWithinCap(t *testing.T, srv *testServer, mallory string) {
	for i := range 6 {
		for a := range 5 {
			srv.do(t, req{method: "PUT", path: memPath("mallory", "profile") + fmt.Sprintf("?agent=bot%d", a), token: mallory,
				body: map[string]any{"content": escapeHeavyText(fmt.Sprintf("v%d ", i), 2000)}}).want(t, http.StatusOK)
		}
	}
	keys := readAllPages(t, srv, mallory, memPath("mallory", "changelog")+"?limit=500", memory.MinMaxResponseBytes, "id")
	wantDistinct(t, "changelog", keys, 30)
	keys = readAllPages(t, srv, mallory, memPath("mallory", "changelog")+"?agent=bot3&scope=profile&limit=500", memory.MinMaxResponseBytes, "version")
	if !slices.Equal(keys, []string{"6", "5", "4", "3", "2", "1"}) {
		t.Fatalf("bot3's changelog read %v, want versions 6..1", keys)
	}
}

// testDocumentsPerOwner: with maxDocumentsPerOwner 5 (the 5 profiles of the
// changelog subtest), a sixth agent id's profile is 409 quota-exceeded
// naming the quota and the count, and writes nothing.
func testDocumentsPerOwner(t *testing.T, srv *testServer, mallory string) {
	r := srv.do(t, req{method: "PUT", path: memPath("mallory", "profile") + "?agent=bot5", token: mallory,
		body: map[string]any{"content": "One more agent id."}})
	wantQuotaProblem(t, r, http.StatusConflict, "quota-exceeded", memory.QuotaDocumentsPerOwner, 5, 5, 1)
	var d struct {
		Version int64 `json:"version"`
	}
	srv.do(t, req{method: "GET", path: memPath("mallory", "profile") + "?agent=bot5", token: mallory}).want(t, http.StatusOK).decode(t, &d)
	if d.Version != 0 {
		t.Fatalf("the refused profile is at version %d", d.Version)
	}
	srv.do(t, req{method: "PUT", path: memPath("mallory", "profile") + "?agent=bot1", token: mallory,
		body: map[string]any{"content": "A new version of a profile mallory has."}}).want(t, http.StatusOK)
}

// testMemoryHistoryWithinCap: the agent PATCHes its own memory 40 times
// with 400 bytes that JSON escapes; with maxHistoryPerMemory 20 the
// history keeps the add and the newest 20 updates, read within the cap
// page by page.
func testMemoryHistoryWithinCap(t *testing.T, srv *testServer, mallory string) {
	var added struct {
		Memory struct {
			ID string `json:"id"`
		} `json:"memory"`
	}
	srv.do(t, req{method: "POST", path: memPath("mallory", "memories"), token: mallory,
		body: map[string]any{"content": "Mallory's pipeline has many steps", "category": "project"}}).want(t, http.StatusCreated).decode(t, &added)
	id := added.Memory.ID
	for i := range 40 {
		srv.do(t, req{method: "PATCH", path: memPath("mallory", "memories", id), token: mallory,
			body: map[string]any{"content": escapeHeavyText(fmt.Sprintf("Pipeline step %d ", i), 400)}}).want(t, http.StatusOK)
	}
	// The request of the review, without parameters.
	r := srv.do(t, req{method: "GET", path: memPath("mallory", "memories", id, "history"), token: mallory}).want(t, http.StatusOK)
	if len(r.body) > memory.MinMaxResponseBytes {
		t.Fatalf("the history after 40 updates is %d bytes, over the cap of %d", len(r.body), memory.MinMaxResponseBytes)
	}
	keys := readAllPages(t, srv, mallory, memPath("mallory", "memories", id, "history")+"?limit=1000", memory.MinMaxResponseBytes, "action")
	if len(keys) != 21 || keys[0] != "add" || slices.Index(keys[1:], "add") >= 0 {
		t.Fatalf("history after 40 updates: %v, want the add and the newest 20 updates", keys)
	}
}

// testMemoryListWithinCap: the review's list, 500 memories of 460 bytes
// that JSON escapes (1.7 MB at limit 500), is read within the cap through
// the existing cursor; a search of the 100 best gives those that fit and
// counts the rest.
func testMemoryListWithinCap(t *testing.T, srv *testServer, mallory string) {
	for b := range 5 {
		items := make([]map[string]any, 100)
		for i := range items {
			n := b*100 + i
			items[i] = map[string]any{"content": escapeHeavyText(fmt.Sprintf("Fact %d of %d ", n, n*7+3), 460), "category": "project"}
		}
		srv.do(t, req{method: "POST", path: memPath("mallory", "memories", "batch"), token: mallory, body: map[string]any{"items": items}}).want(t, http.StatusOK)
	}
	keys := readAllPages(t, srv, mallory, memPath("mallory", "memories")+"?limit=500", memory.MinMaxResponseBytes, "id")
	wantDistinct(t, "memory list", keys, 501) // and the memory of the history subtest

	r := srv.do(t, req{method: "POST", path: memPath("mallory", "search"), token: mallory,
		body: map[string]any{"query": "fact", "mode": "vector", "topK": 100}}).want(t, http.StatusOK)
	if len(r.body) > memory.MinMaxResponseBytes {
		t.Fatalf("search of 100: %d bytes, over the cap", len(r.body))
	}
	var found struct {
		Results   []json.RawMessage `json:"results"`
		Truncated bool              `json:"truncated"`
		Omitted   int               `json:"omitted"`
	}
	r.decode(t, &found)
	if !found.Truncated || len(found.Results) == 0 || len(found.Results)+found.Omitted != 100 {
		t.Fatalf("search of 100: %d results, %d omitted, truncated %v", len(found.Results), found.Omitted, found.Truncated)
	}
}

// testSessionsWithinCap: 60 sessions whose titles JSON escapes (175 KB at
// limit 500) are listed within the cap through the cursor.
func testSessionsWithinCap(t *testing.T, srv *testServer, mallory string) {
	for i := range 60 {
		srv.do(t, req{method: "POST", path: memPath("mallory", "sessions"), token: mallory,
			body: map[string]any{"id": fmt.Sprintf("s%02d", i), "title": escapeHeavyText("Session ", 480)}}).want(t, http.StatusCreated)
	}
	keys := readAllPages(t, srv, mallory, memPath("mallory", "sessions")+"?limit=500", memory.MinMaxResponseBytes, "id")
	wantDistinct(t, "sessions", keys, 60)
}
