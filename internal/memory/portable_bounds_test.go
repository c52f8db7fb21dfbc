package memory

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/portable"
)

// The import held to the write paths' bounds (issue 26, reviews 18 to 21;
// docs/export.md "An import holds what it brings"). The fixtures are
// portable_test.go's and portable_refusals_test.go's.

// longTurnExport is alice's export of one session: a user message and 30
// assistant messages, one turn of 31.
func longTurnExport(t *testing.T, a *fixture) []string {
	t.Helper()
	a.newSession("alice", "loop")
	msgs := []TurnMessage{{Role: RoleUser, Content: "Plan the trip"}}
	for i := range 30 {
		msgs = append(msgs, TurnMessage{Role: RoleAssistant, Content: fmt.Sprintf("Step %d of the plan: %s", i, strings.Repeat("walk to the station and take the early train. ", 6))})
	}
	a.appendTurn("alice", "loop", msgs...)
	return strings.Split(strings.TrimSuffix(string(exportAll(t, a, "alice", false, 0)), "\n"), "\n")
}

// TestImportHoldsSessionsToTheConversationLimits (issue 26, eighteenth
// review, MEDIUM 2): an import took sessions of any length, turns past
// limits.maxTurnMessages and messages of 0 tokens (a window then loaded a
// turn of 20,000 messages for a budget of 1). Now a turn or a session past
// the target policy's limits is a 422 naming the line, and a message's
// tokens are counted anew, not taken from the file.
func TestImportHoldsSessionsToTheConversationLimits(t *testing.T) {
	a := newFixture(t)
	lines := longTurnExport(t, a)
	for name, c := range map[string]struct {
		limit func(*Policy)
		field string
	}{
		"turn messages": {func(p *Policy) {
			p.Conversation.Limits.MaxMessagesPerTurn, p.Conversation.Limits.MaxTurnMessages = 10, 20
		}, "].seq"},
		"turn tokens": {func(p *Policy) { p.Conversation.Limits.MaxTurnTokens = 1000 }, "].seq"},
		"session":     {func(p *Policy) { p.Conversation.Limits.MaxMessagesPerSession = 10 }, "].messageCount"},
	} {
		t.Run(name, func(t *testing.T) {
			b := newFixture(t, inDatabaseOf(a), withPolicy(c.limit))
			_, err := b.store.Import(ctx(t), ImportRequest{Body: []byte(strings.Join(lines, "\n") + "\n"), Embedder: testExportInfo.Embedder})
			v, ok := IsValidation(err)
			if !ok || !strings.HasSuffix(v.Fields[0].Field, c.field) {
				t.Fatalf("import past the limit: %v, want a 422 naming %s", err, c.field)
			}
			if n := rowsOf(t, b, b.store.sql.messages); n != 0 {
				t.Errorf("%d messages written", n)
			}
		})
	}
	t.Run("tokens counted anew", func(t *testing.T) {
		forged := forgeAll(t, lines, portable.KindMessage, func(rec map[string]any) { rec["tokens"] = 0 })
		b := newFixture(t, inDatabaseOf(a))
		if _, err := b.store.Import(ctx(t), ImportRequest{Body: retrailer(t, forged), Embedder: testExportInfo.Embedder}); err != nil {
			t.Fatal(err)
		}
		var zero int64
		if err := b.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+b.store.sql.messages+` WHERE tokens = 0`).Scan(&zero); err != nil || zero != 0 {
			t.Errorf("%d messages kept the file's 0 tokens (%v)", zero, err)
		}
	})
}

// TestImportHistoryDetailsBounded (issue 26, eighteenth review, MEDIUM 1):
// an import's history details were only asked to start with {, and 19.5
// KB of numbers read back as 32 MB with the memory's history. Now they
// are held to metadata's rules within 16 KiB as stored.
func TestImportHistoryDetailsBounded(t *testing.T) {
	a := newFixture(t)
	a.add(AddRequest{Owner: "alice", Content: "Alice prefers tea", Category: "preference", Source: SourceUser})
	lines := forgeAll(t, strings.Split(strings.TrimSuffix(string(exportAll(t, a, "alice", false, 0)), "\n"), "\n"), portable.KindHistory, func(rec map[string]any) {
		rec["details"] = json.RawMessage(`{"n": [` + strings.TrimSuffix(strings.Repeat("1e300,", 60), ",") + `]}`)
	})
	b := newFixture(t, inDatabaseOf(a))
	_, err := b.store.Import(ctx(t), ImportRequest{Body: retrailer(t, lines), Embedder: testExportInfo.Embedder})
	v, ok := IsValidation(err)
	if !ok || !strings.HasSuffix(v.Fields[0].Field, "].details") || !strings.Contains(v.Fields[0].Message, "as stored") {
		t.Fatalf("import of history details that grow stored: %v", err)
	}
	if n := rowsOf(t, b, b.store.sql.history); n != 0 {
		t.Errorf("%d history rows written", n)
	}
}

// forgeFirst changes the first record of kind in an export's lines (its
// trailer left out, for retrailer).
func forgeFirst(t *testing.T, lines []string, kind string, change func(map[string]any)) []string {
	t.Helper()
	out, n := forge(t, lines, kind, 1, change)
	if n == 0 {
		t.Fatalf("no %s record to forge", kind)
	}
	return out
}

// forgeAll changes every record of kind in an export's lines (its trailer
// left out, for retrailer).
func forgeAll(t *testing.T, lines []string, kind string, change func(map[string]any)) []string {
	t.Helper()
	out, _ := forge(t, lines, kind, len(lines), change)
	return out
}

// forge changes the first most records of kind in an export's lines and
// leaves out the trailer; it returns the lines and how many it changed.
func forge(t *testing.T, lines []string, kind string, most int, change func(map[string]any)) ([]string, int) {
	t.Helper()
	var out []string
	n := 0
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		switch {
		case rec["kind"] == portable.KindTrailer:
			continue
		case rec["kind"] == kind && n < most:
			change(rec)
			b, _ := json.Marshal(rec)
			l = string(b)
			n++
		}
		out = append(out, l)
	}
	return out, n
}

// TestImportHoldsTextsToTheWriteBounds (issue 26, nineteenth review,
// MEDIUM 2 and 3, LOWs): an import took texts of any length (a 1.3 MB
// memory or profile answered past the 1 MiB cap, a 1 MiB title or tool
// call id cost every list and window), summaries with the file's tokens,
// counters at bigint's end and times in the future. Each is now a 422
// naming the line's field, and nothing of the owner is written.
func TestImportHoldsTextsToTheWriteBounds(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	lines := strings.Split(strings.TrimSuffix(string(exportAll(t, a, "alice", false, 0)), "\n"), "\n")
	long := strings.Repeat("x", 70<<10)
	for _, c := range []struct {
		name, kind, field string
		change            func(map[string]any)
	}{
		{"memory content", portable.KindMemory, "].content", func(r map[string]any) { r["content"] = long }},
		{"history content", portable.KindHistory, "].newContent", func(r map[string]any) { r["newContent"] = long }},
		{"session title", portable.KindSession, "].title", func(r map[string]any) { r["title"] = long }},
		{"tool call id", portable.KindMessage, "].toolCallId", func(r map[string]any) { r["toolCallId"] = "not a tool call id" }},
		{"flags", portable.KindMessage, "].flags", func(r map[string]any) { r["flags"] = []string{"trusted"} }},
		{"message content", portable.KindMessage, "].content", func(r map[string]any) { r["content"] = long }},
		{"summary content", portable.KindSummary, "].content", func(r map[string]any) { r["content"] = long }},
		{"episode summary", portable.KindEpisode, "].summary", func(r map[string]any) { r["summary"] = long }},
		{"document", portable.KindDocument, "].content", func(r map[string]any) { r["content"] = long }},
		{"document change", portable.KindDocumentChange, "].after", func(r map[string]any) { r["after"] = long }},
		{"access count", portable.KindMemory, "].accessCount", func(r map[string]any) { r["accessCount"] = int64(1) << 62 }},
		{"time in the future", portable.KindMemory, "].createdAt", func(r map[string]any) { r["createdAt"] = "2999-01-01T00:00:00Z" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
			_, err := b.store.Import(ctx(t), ImportRequest{Body: retrailer(t, forgeFirst(t, lines, c.kind, c.change)), Embedder: testExportInfo.Embedder})
			v, ok := IsValidation(err)
			if !ok || !slices.ContainsFunc(v.Fields, func(f FieldError) bool { return strings.HasSuffix(f.Field, c.field) }) {
				t.Fatalf("import with a forged %s: %v, want a 422 naming %s", c.name, err, c.field)
			}
			holdsNoRows(t, b, "a refused import", b.store.sql.memories, b.store.sql.messages, b.store.sql.sessions)
		})
	}
}

// TestImportHoldsSummarySourcesToCompactionsShape (issue 26, twentieth
// review, HIGH 1 and MEDIUM 2): an import took any number of sources of a
// summary, naming any summary of the owner, and sources alone extended a
// summary the tenant held; 1,000 sources of one 64 KiB child made one
// describe answer 65.8 MB. Now sources come with their summary, at most
// 64 with distinct ords, a condensed summary's children one depth lower
// in its session with it as parent; and describe reads at most 64
// children within the answer's byte cap.
func TestImportHoldsSummarySourcesToCompactionsShape(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	lines := strings.Split(strings.TrimSuffix(string(exportAll(t, a, "alice", false, 0)), "\n"), "\n")
	var source, header string
	var kept []string
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		switch {
		case rec["kind"] == portable.KindHeader:
			header = l
		case rec["kind"] == portable.KindSummarySource && rec["childId"] != nil && source == "":
			source = l
		case rec["kind"] == portable.KindTrailer:
			continue
		}
		kept = append(kept, l)
	}
	if source == "" {
		t.Fatal("no condensed summary's source in the export")
	}
	many := slices.Clone(kept)
	for i := range 64 {
		var rec map[string]any
		_ = json.Unmarshal([]byte(source), &rec)
		rec["ord"] = 100 + i
		b, _ := json.Marshal(rec)
		many = append(many, string(b))
	}
	for name, body := range map[string][]string{"too many sources": many, "sources without their summary": {header, source}} {
		t.Run(name, func(t *testing.T) {
			b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
			_, err := b.store.Import(ctx(t), ImportRequest{Body: retrailer(t, body), Embedder: testExportInfo.Embedder})
			v, ok := IsValidation(err)
			if !ok || !strings.HasSuffix(v.Fields[0].Field, "].summaryId") {
				t.Fatalf("import: %v, want a 422 naming summaryId", err)
			}
			if n := rowsOf(t, b, b.store.sql.summaries); n != 0 {
				t.Errorf("%d summaries written", n)
			}
		})
	}
}

// TestImportHoldsEpisodesToTheOwnersLimit (issue 26, twenty-first review,
// MEDIUM 1): imports gave one owner 22,000 episodes, past
// limits.maxEpisodesPerOwner, and each context call then read them all.
// Now an owner that would pass the limit is a 422 naming it, and nothing
// of it is written; the same file again counts its episodes once.
func TestImportHoldsEpisodesToTheOwnersLimit(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	lines := strings.Split(strings.TrimSuffix(string(exportAll(t, a, "alice", false, 0)), "\n"), "\n")
	kind := func(l string) string {
		var env struct{ Kind string }
		_ = json.Unmarshal([]byte(l), &env)
		return env.Kind
	}
	var episode string
	for _, l := range lines {
		if kind(l) == portable.KindEpisode {
			episode = l
		}
	}
	if episode == "" {
		t.Fatal("no episode in the export")
	}
	var rec map[string]any
	_ = json.Unmarshal([]byte(episode), &rec)
	rec["id"] = "7e57a000-0000-4000-8000-00000000e002"
	second, _ := json.Marshal(rec)
	var two []string
	for _, l := range lines {
		if kind(l) != portable.KindTrailer {
			two = append(two, l)
		}
	}
	two = append(two, string(second))
	limitOne := withPolicy(func(p *Policy) { p.Limits.MaxEpisodesPerOwner = 1 })

	b := newFixture(t, withGlobalCategory(), inDatabaseOf(a), limitOne)
	_, err := b.store.Import(ctx(t), ImportRequest{Body: retrailer(t, two), Embedder: testExportInfo.Embedder})
	v, ok := IsValidation(err)
	if !ok || v.Fields[0].Field != "owners[alice]" || !strings.Contains(v.Fields[0].Message, "maxEpisodesPerOwner") {
		t.Fatalf("import of 2 episodes under a limit of 1: %v", err)
	}
	if n := rowsOf(t, b, b.store.sql.memories); n != 0 {
		t.Errorf("%d memories written", n)
	}
	// At the limit, and the same file again: accepted both times.
	one := retrailer(t, two[:len(two)-1])
	for i := range 2 {
		if _, err := b.store.Import(ctx(t), ImportRequest{Body: one, Embedder: testExportInfo.Embedder}); err != nil {
			t.Fatalf("import %d at the limit: %v", i, err)
		}
	}
}
