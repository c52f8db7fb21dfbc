package memory

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/longterm"
)

// Issue 26's hostile review: answers outside the byte cap. The profile
// changelog (25 MB for 500 writes across 5 agent ids), a memory's history
// (3.3 MB after 1,000 updates, never pruned) and the memory list (1.7 MB
// for 500 memories of text that JSON escapes) were built whole; now every
// list is a page within the cap whose cursor reads on, and every ranked
// answer keeps its best results within the cap.

// history reads one memory's history, oldest first: its first page of up
// to 1,000 rows (all of it in these tests).
func (f *fixture) history(owner, id string) ([]HistoryEntry, error) {
	page, err := f.store.History(ctx(f.t), HistoryRequest{Owner: owner, ID: id, Limit: maxHistoryPage})
	if err != nil {
		return nil, err
	}
	if page.NextCursor != "" {
		f.t.Fatalf("the history of %s does not fit one page", id)
	}
	return page.Items, nil
}

// escapeHeavy is n bytes of text of which most become 6 bytes of JSON.
func escapeHeavy(prefix string, n int) string {
	return (prefix + strings.Repeat("<&>", n))[:n]
}

// within fails the test when v's JSON is larger than capBytes.
func within(t *testing.T, what string, v any, capBytes int) {
	t.Helper()
	if n := core.JSONSize(v); n > capBytes {
		t.Fatalf("%s: %d bytes, over the cap of %d", what, n, capBytes)
	}
}

// readPages follows a list's cursor from the first page to the last, each
// page within capBytes, and returns every item's key in order. A page that
// ends before its limit must say truncated.
func readPages[T any](t *testing.T, what string, capBytes, limit int, key func(T) string,
	page func(cursor string) ([]T, PageBounds, error)) []string {
	t.Helper()
	var keys []string
	cursor := ""
	for pages := 0; ; pages++ {
		items, bounds, err := page(cursor)
		if err != nil {
			t.Fatalf("%s, page %d: %v", what, pages, err)
		}
		within(t, fmt.Sprintf("%s, page %d", what, pages), struct {
			Items []T `json:"items"`
			PageBounds
		}{items, bounds}, capBytes)
		if len(items) == 0 {
			t.Fatalf("%s: page %d is empty", what, pages)
		}
		if bounds.NextCursor != "" && len(items) < limit && !bounds.Truncated {
			t.Fatalf("%s: page %d holds %d of %d items and does not say truncated", what, pages, len(items), limit)
		}
		for _, it := range items {
			keys = append(keys, key(it))
		}
		if bounds.NextCursor == "" {
			return keys
		}
		if pages > 10_000 {
			t.Fatalf("%s: the cursor does not progress", what)
		}
		cursor = bounds.NextCursor
	}
}

// wantKeys fails unless got is want, in order (every item exactly once).
func wantKeys(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: read %d items through the pages, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: item %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

// TestChangelogBoundedByByteCap: the review's changelog, smaller: 5 agent
// ids × 6 writes of 8,000 bytes that JSON escapes (each entry about 50 KB
// with its before and after). With a cap of 64 KiB a page of the largest
// limit stays within the cap (or is one entry, the first of a page always
// being given) and says truncated; the cursor reads every entry once,
// newest first, and the agent and scope filters page the same way.
func TestChangelogBoundedByByteCap(t *testing.T) {
	const capBytes = MinMaxResponseBytes
	f := newFixture(t, withMaxResponseBytes(capBytes))
	var want []string
	for i := range 6 {
		for a := range 5 {
			agent := fmt.Sprintf("bot%d", a)
			if _, err := f.store.PutDocument(ctx(t), PutDocumentRequest{Owner: "mallory", Agent: agent, Kind: DocProfile,
				Content: escapeHeavy(fmt.Sprintf("v%d ", i), MaxDocumentBytes-192), Source: SourceAgent}); err != nil {
				t.Fatal(err)
			}
			want = append([]string{fmt.Sprintf("%s/%d", agent, i+1)}, want...)
		}
	}
	key := func(e ChangelogEntry) string { return fmt.Sprintf("%s/%d", e.Agent, e.Version) }
	read := func(req ChangelogRequest) func(string) ([]ChangelogEntry, PageBounds, error) {
		return func(cursor string) ([]ChangelogEntry, PageBounds, error) {
			req.Cursor = cursor
			p, err := f.store.Changelog(ctx(t), req)
			if err != nil {
				return nil, PageBounds{}, err
			}
			return p.Items, p.PageBounds, nil
		}
	}
	first, err := f.store.Changelog(ctx(t), ChangelogRequest{Owner: "mallory", Limit: longterm.MaxChangelogPage})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Truncated || first.NextCursor == "" {
		t.Fatalf("a changelog page of %d entries (%d bytes) does not say truncated", len(first.Items), core.JSONSize(first))
	}
	wantKeys(t, "changelog", readPages(t, "changelog", 2*MaxDocumentBytes*6+4096, longterm.MaxChangelogPage, key,
		read(ChangelogRequest{Owner: "mallory", Limit: longterm.MaxChangelogPage})), want)
	bot2 := "bot2"
	var want2 []string
	for _, k := range want {
		if strings.HasPrefix(k, "bot2/") {
			want2 = append(want2, k)
		}
	}
	wantKeys(t, "changelog of bot2", readPages(t, "changelog of bot2", 2*MaxDocumentBytes*6+4096, 2, key,
		read(ChangelogRequest{Owner: "mallory", Agent: &bot2, Scope: DocProfile, Limit: 2})), want2)

	// A page of small entries holds many, within the cap.
	for i := range 40 {
		if _, err := f.store.PutDocument(ctx(t), PutDocumentRequest{Owner: "nora", Kind: DocProfile,
			Content: escapeHeavy(fmt.Sprintf("small %d ", i), 600), Source: SourceAgent}); err != nil {
			t.Fatal(err)
		}
	}
	small, err := f.store.Changelog(ctx(t), ChangelogRequest{Owner: "nora", Limit: longterm.MaxChangelogPage})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "changelog of small entries", small, capBytes)
	if !small.Truncated || len(small.Items) < 2 || small.Items[0].Version != 40 {
		t.Fatalf("changelog of small entries: %d entries, truncated %v", len(small.Items), small.Truncated)
	}
	if _, err := f.store.Changelog(ctx(t), ChangelogRequest{Owner: "nora", Cursor: "not-a-cursor"}); !isValidation(err, "cursor") {
		t.Fatalf("a forged cursor: %v, want a validation error naming cursor", err)
	}
}

// TestMemoryHistoryBoundedByByteCap: 150 history rows of a memory (seeded
// as the store writes them, each with 460 bytes of text JSON escapes as
// old and new content: 800 KB of JSON) are read within a cap of 64 KiB,
// oldest first, page by page through the cursor, every row exactly once;
// the limit bounds a page as well.
func TestMemoryHistoryBoundedByByteCap(t *testing.T) {
	const capBytes = MinMaxResponseBytes
	f := newFixture(t, withMaxResponseBytes(capBytes))
	m := f.add(AddRequest{Owner: "ann", Content: "Ann keeps a long audit trail", Category: "project"})
	f.x(`INSERT INTO ` + f.store.sql.history + ` (memory_id, owner_id, action, actor, old_content, new_content)
		SELECT '` + m.Memory.ID + `', 'ann', 'update', 'agent', 'old ' || i || ' ' || repeat('<&>', 150), 'new ' || i || ' ' || repeat('<&>', 150)
		FROM generate_series(1, 150) AS i`)
	var want []string
	all, err := f.admin.Query(ctx(t), `SELECT id FROM `+f.store.sql.history+` WHERE memory_id = $1 ORDER BY id`, m.Memory.ID)
	if err != nil {
		t.Fatal(err)
	}
	for all.Next() {
		var id int64
		if err := all.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprint(id))
	}
	if all.Err() != nil || len(want) != 151 {
		t.Fatalf("seeded %d history rows: %v", len(want), all.Err())
	}
	key := func(h HistoryEntry) string { return fmt.Sprint(h.ID) }
	read := func(limit int) func(string) ([]HistoryEntry, PageBounds, error) {
		return func(cursor string) ([]HistoryEntry, PageBounds, error) {
			p, err := f.store.History(ctx(t), HistoryRequest{Owner: "ann", ID: m.Memory.ID, Limit: limit, Cursor: cursor})
			if err != nil {
				return nil, PageBounds{}, err
			}
			return p.Items, p.PageBounds, nil
		}
	}
	first, err := f.store.History(ctx(t), HistoryRequest{Owner: "ann", ID: m.Memory.ID, Limit: maxHistoryPage})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Truncated || first.NextCursor == "" || first.Items[0].Action != "add" {
		t.Fatalf("a history page of %d rows (%d bytes) does not say truncated", len(first.Items), core.JSONSize(first))
	}
	wantKeys(t, "history", readPages(t, "history", capBytes, maxHistoryPage, key, read(maxHistoryPage)), want)
	wantKeys(t, "history by 7", readPages(t, "history by 7", capBytes, 7, key, read(7)), want)
	if _, err := f.store.History(ctx(t), HistoryRequest{Owner: "ann", ID: m.Memory.ID, Limit: maxHistoryPage + 1}); !isValidation(err, "limit") {
		t.Fatalf("limit above the largest: %v", err)
	}
	if _, err := f.store.History(ctx(t), HistoryRequest{Owner: "ann", ID: m.Memory.ID, Cursor: "MA"}); !isValidation(err, "cursor") {
		t.Fatalf("a cursor of id 0: %v", err)
	}
}

// TestOtherPagesBoundedByByteCap: the session list, the owners and the
// global memories are pages within the byte cap too (here 4 KiB, asked by
// the caller), read whole through their cursors; an append is answered
// with the stored messages that fit, naming the rest for the message list.
func TestOtherPagesBoundedByByteCap(t *testing.T) {
	const capBytes = 4 << 10
	f := newFixture(t, withPolicy(func(p *Policy) {
		p.Categories = append(p.Categories, Category{Name: "handbook", Global: true})
	}))
	var sessions, owners []string
	topics := []string{"parking", "lunch", "badges", "printers", "holidays", "security", "travel", "expenses", "laptops",
		"meetings", "visitors", "recycling"}
	for i := range 12 {
		id := fmt.Sprintf("s%02d", i)
		if _, err := f.store.CreateSession(ctx(t), CreateSessionRequest{Owner: "ann", ID: id, Title: escapeHeavy("title ", 480)}); err != nil {
			t.Fatal(err)
		}
		sessions = append([]string{id}, sessions...)
		owner := fmt.Sprintf("owner-%02d-", i) + strings.Repeat("x", 200)
		f.add(AddRequest{Owner: owner, Content: "Owner " + owner + " exists"})
		owners = append(owners, owner)
		f.add(AddRequest{Owner: "ann", Content: fmt.Sprintf("Handbook rule %d about %s: ", i, topics[i]) + escapeHeavy("", 400),
			Category: "handbook", Source: SourceSystem})
	}
	// A fixed time (Citus refuses now() beside a column in an UPDATE).
	f.x(`UPDATE ` + f.store.sql.sessions + ` SET last_active_at = to_timestamp(1767225600 - substr(id, 2)::int)`)
	wantKeys(t, "sessions", readPages(t, "sessions", capBytes, conversation.MaxSessionPage, func(c Session) string { return c.ID },
		func(cursor string) ([]Session, PageBounds, error) {
			p, err := f.store.ListSessions(ctx(t), ListSessionsRequest{Owner: "ann", Limit: conversation.MaxSessionPage, Cursor: cursor, MaxBytes: capBytes})
			if err != nil {
				return nil, PageBounds{}, err
			}
			return p.Sessions, p.PageBounds, nil
		}), reversed(sessions))
	got := readPages(t, "owners", 1<<10, maxListLimit, func(o OwnerSummary) string { return o.Owner },
		func(cursor string) ([]OwnerSummary, PageBounds, error) {
			p, err := f.store.Owners(ctx(t), OwnersRequest{Limit: maxListLimit, Cursor: cursor, MaxBytes: 1 << 10})
			if err != nil {
				return nil, PageBounds{}, err
			}
			return p.Items, p.PageBounds, nil
		})
	for _, o := range owners {
		if !slices.Contains(got, o) {
			t.Fatalf("owner %s is on no page of %v", o, got)
		}
	}
	if global := readPages(t, "global memories", capBytes, maxListLimit, func(m Memory) string { return m.ID },
		func(cursor string) ([]Memory, PageBounds, error) {
			p, err := f.store.ListGlobal(ctx(t), ListRequest{Limit: maxListLimit, Cursor: cursor, MaxBytes: capBytes})
			if err != nil {
				return nil, PageBounds{}, err
			}
			return p.Items, p.PageBounds, nil
		}); len(global) != 12 {
		t.Fatalf("read %d global memories through the pages, want 12", len(global))
	}

	f.newSession("ann", "echo")
	turn := make([]TurnMessage, 20)
	for i := range turn {
		turn[i] = assistantTurn(fmt.Sprintf("part %d: ", i) + strings.Repeat("<>", 200))
	}
	res, err := f.store.AppendTurn(ctx(t), AppendRequest{Owner: "ann", SessionID: "echo", Messages: turn, MaxBytes: capBytes})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "append answer", res, capBytes)
	if len(res.Messages) == 0 || res.Session.MessageCount != 20 {
		t.Fatalf("append answered %d messages of a session of %d", len(res.Messages), res.Session.MessageCount)
	}
	checkSeqRange(t, "append answer", res.Truncation, int64(len(res.Messages))+1, 21)
	if back := f.readRange("ann", "echo", res.OmittedFrom, res.OmittedTo); len(back) != 20-len(res.Messages) {
		t.Fatalf("read back %d of the messages the answer left out", len(back))
	}
}

// isValidation reports whether err is a ValidationError naming field.
func isValidation(err error, field string) bool {
	v, ok := IsValidation(err)
	return ok && slices.ContainsFunc(v.Fields, func(fe FieldError) bool { return fe.Field == field })
}

// TestCompactionRootsBoundedByByteCap: a policy of the smallest chunks
// and groups and one level keeps a root per 4 messages; the compaction's
// answer holds the oldest roots that fit the cap and counts the others.
func TestCompactionRootsBoundedByByteCap(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) {
		p.Conversation.Compaction = ConversationCompaction{Threshold: 0.75, ChunkSize: 2, CondenseGroupSize: 2, MaxDepth: 1}
	}))
	f.newSession("ann", "s")
	for i := range 40 {
		f.appendTurn("ann", "s", userTurn(fmt.Sprintf("Question %d: ", i)+strings.Repeat("<&> ", 40)), assistantTurn("Answer. "+strings.Repeat("<&> ", 40)))
	}
	res, err := f.store.CompactSession(ctx(t), CompactSessionRequest{Owner: "ann", SessionID: "s", Mode: CompactFull, Force: true, MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "compaction answer", res, 4<<10)
	roots := f.n(`SELECT count(*) FROM ` + f.store.sql.summaries + ` WHERE session_id = 's' AND parent_id IS NULL`)
	if !res.RootsTruncated || len(res.Roots) == 0 || int64(len(res.Roots)+res.RootsOmitted) != roots || res.Roots[0].EarliestSeq != 1 {
		t.Fatalf("compaction answer: %d roots, %d omitted, truncated %v; the session has %d", len(res.Roots), res.RootsOmitted, res.RootsTruncated, roots)
	}
}
