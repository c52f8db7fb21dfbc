package memory

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// seedEscapeHeavyMemories stores n memories of owner whose content JSON
// escapes (about 3 KB of JSON each), created a second apart, and returns
// their ids newest first (the list's order). The first goes through Add;
// the others copy its embedding in SQL, which is much faster than n adds.
func (f *fixture) seedEscapeHeavyMemories(owner string, n int) []string {
	f.t.Helper()
	seed := f.add(AddRequest{Owner: owner, Content: escapeHeavy("fact 0: ", 460), Category: "project"})
	f.x(fmt.Sprintf(`INSERT INTO %s (id, owner_id, source, category, content, embedding, created_at, updated_at)
		SELECT gen_random_uuid(), m.owner_id, m.source, m.category, 'fact ' || i || ': ' || repeat('<&>', 150), m.embedding,
			m.created_at - i * interval '1 second', m.created_at - i * interval '1 second'
		FROM %s AS m, generate_series(1, %d) AS i WHERE m.id = '%s'`, f.store.sql.memories, f.store.sql.memories, n-1, seed.Memory.ID))
	ids := f.texts(`SELECT id::text FROM `+f.store.sql.memories+` WHERE owner_id = $1 ORDER BY created_at DESC, id DESC`, owner)
	if len(ids) != n {
		f.t.Fatalf("seeded %d memories, want %d", len(ids), n)
	}
	return ids
}

// TestMemoryListBoundedByByteCap: the review's list, 500 memories of 460
// bytes that JSON escapes (1.7 MB of JSON at the largest limit), is read
// within a cap of 64 KiB, page by page through the existing cursor, every
// memory exactly once; and within the default cap of 1 MiB too.
func TestMemoryListBoundedByByteCap(t *testing.T) {
	const capBytes = MinMaxResponseBytes
	f := newFixture(t, withMaxResponseBytes(capBytes))
	want := f.seedEscapeHeavyMemories("ann", 500)
	key := func(m Memory) string { return m.ID }
	read := func(maxBytes int) func(string) ([]Memory, PageBounds, error) {
		return func(cursor string) ([]Memory, PageBounds, error) {
			p, err := f.store.List(ctx(t), ListRequest{Owner: "ann", Limit: maxListLimit, Cursor: cursor, MaxBytes: maxBytes})
			if err != nil {
				return nil, PageBounds{}, err
			}
			return p.Items, p.PageBounds, nil
		}
	}
	first, err := f.store.List(ctx(t), ListRequest{Owner: "ann", Limit: maxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Truncated || first.NextCursor == "" || len(first.Items) < 10 {
		t.Fatalf("a list page of %d memories (%d bytes) does not say truncated", len(first.Items), core.JSONSize(first))
	}
	wantKeys(t, "memory list", readPages(t, "memory list", capBytes, maxListLimit, key, read(0)), want)
	wantKeys(t, "memory list within 8 KiB", readPages(t, "memory list within 8 KiB", 8<<10, maxListLimit, key, read(8<<10)), want)

	big := newFixture(t, inDatabaseOf(f))
	big.seedEscapeHeavyMemories("ann", 500)
	page, err := big.store.List(ctx(t), ListRequest{Owner: "ann", Limit: maxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "memory list at the default cap", page, DefaultMaxResponseBytes)
	if !page.Truncated || len(page.Items) < 250 {
		t.Fatalf("memory list at the default cap: %d memories, truncated %v", len(page.Items), page.Truncated)
	}
}

// TestRankedAnswersBoundedByByteCap: a search and an episode search whose
// results would pass the cap give their best results within it, say
// truncated and count the rest; only the results given count as read.
func TestRankedAnswersBoundedByByteCap(t *testing.T) {
	const capBytes = MinMaxResponseBytes
	f := newFixture(t, withMaxResponseBytes(capBytes))
	f.seedEscapeHeavyMemories("ann", 100)
	res, err := f.store.SearchAnswer(ctx(t), SearchRequest{Owner: "ann", Query: "fact", Mode: SearchVector, TopK: 100})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "search", res, capBytes)
	if !res.Truncated || len(res.Results) < 10 || len(res.Results)+res.Omitted != 100 {
		t.Fatalf("search within 64 KiB: %d results, %d omitted, truncated %v", len(res.Results), res.Omitted, res.Truncated)
	}
	// (The seeded memories share one embedding: their order among equal
	// scores is the engine's, so only the count is compared.)
	all, err := f.store.Search(ctx(t), SearchRequest{Owner: "ann", Query: "fact", Mode: SearchVector, TopK: 100})
	if err != nil || len(all) != 100 {
		t.Fatalf("the ranking without the cap: %d results, %v", len(all), err)
	}
	small, err := f.store.SearchAnswer(ctx(t), SearchRequest{Owner: "ann", Query: "fact", Mode: SearchHybrid, TopK: 100, MaxBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "search within 8 KiB", small, 8<<10)
	if !small.Truncated || len(small.Results) == 0 || len(small.Results)+small.Omitted != 100 {
		t.Fatalf("search within 8 KiB: %d results, %d omitted", len(small.Results), small.Omitted)
	}

	for i := range 6 {
		id := fmt.Sprintf("trip-%d", i)
		f.newSession("ann", id)
		for j := range 3 {
			f.appendTurn("ann", id, userTurn(fmt.Sprintf("Trip %d step %d: ", i, j)+strings.Repeat("<&> ", 100)), assistantTurn("Noted."))
		}
		if res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "ann", SessionID: id}); err != nil || res.Episode == nil {
			t.Fatalf("ending %s: %+v, %v", id, res, err)
		}
	}
	eps, err := f.store.SearchEpisodes(ctx(t), EpisodeSearchRequest{Owner: "ann", MaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "episode search within 4 KiB", eps, 4<<10)
	if !eps.Truncated || len(eps.Results) == 0 || len(eps.Results)+eps.Omitted != 6 {
		t.Fatalf("episode search within 4 KiB: %d results, %d omitted, truncated %v", len(eps.Results), eps.Omitted, eps.Truncated)
	}
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// TestListItemBoundsHold: the bounds list items are taken on are upper
// bounds of what encoding/json writes, for the worst text and the largest
// numbers and timestamps.
func TestListItemBoundsHold(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	when := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(13*3600+59*60)))
	for i := range 300 {
		n := r.IntN(600)
		m := Memory{ID: nastyText(r, 36), Owner: nastyText(r, 40), Agent: nastyText(r, 20), Session: nastyText(r, 20),
			SourceSession: nastyText(r, 20), Source: Source(nastyText(r, 6)), Category: nastyText(r, 12), Content: nastyText(r, n),
			Importance: math.MinInt, Flags: []string{nastyText(r, 9)}, Active: true, SupersededBy: nastyText(r, 36),
			ExpiresAt: &when, CreatedAt: when, UpdatedAt: when, LastAccessedAt: &when, AccessCount: math.MinInt64, Withheld: true}
		f := -math.SmallestNonzeroFloat64 * 3
		e := Episode{ID: nastyText(r, 36), Owner: nastyText(r, 40), SessionID: nastyText(r, 20), Agent: nastyText(r, 20),
			Summary: nastyText(r, n), Method: nastyText(r, 10), UserTurns: math.MinInt, StartedAt: when, EndedAt: when, CreatedAt: when}
		for _, v := range []any{
			m,
			SearchHit{Memory: m, Score: f, VectorScore: f, TextScore: f, DecayScore: f},
			ChangelogEntry{ID: math.MinInt64, Owner: nastyText(r, 40), Agent: nastyText(r, 20), Kind: DocumentKind(nastyText(r, 11)),
				Version: math.MinInt64, Source: Source(nastyText(r, 6)), ActorID: nastyText(r, 30), Before: nastyText(r, n), After: nastyText(r, n), At: when},
			Session{ID: nastyText(r, 40), Owner: nastyText(r, 40), Agent: nastyText(r, 20), Title: nastyText(r, n), Archived: true,
				CreatedAt: when, LastActiveAt: when, MessageCount: math.MinInt64, TokenCount: math.MinInt64, SummarizedThrough: math.MinInt64,
				UnsummarizedTokens: math.MinInt64, SummaryCount: math.MinInt64},
			OwnerSummary{Owner: nastyText(r, n), Active: math.MinInt64, Inactive: math.MinInt64, LastActivity: when},
			EpisodeHit{Episode: e, Score: f, VectorScore: f, TextScore: f, RecencyScore: f},
		} {
			if b, n := core.JSONBound(v), core.JSONSize(v); b < n {
				t.Fatalf("case %d: bound %d < size %d for %T", i, b, n, v)
			}
		}
	}
}
