package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/portable"
	"github.com/engram-dev/engram/internal/testenv"
)

// The import's refusals and what it leaves alone (docs/export.md), and the
// round trip onto Citus. The fixtures are portable_test.go's.

// retrailer rebuilds the trailer of a one-part export whose lines were
// edited, so only the edit is wrong.
func retrailer(t *testing.T, lines []string) []byte {
	t.Helper()
	sum := sha256.New()
	counts := map[string]int64{}
	for _, k := range portable.RecordKinds {
		counts[k] = 0
	}
	for _, l := range lines {
		sum.Write([]byte(l + "\n"))
		var env struct{ Kind string }
		_ = json.Unmarshal([]byte(l), &env)
		if _, ok := counts[env.Kind]; ok {
			counts[env.Kind]++
		}
	}
	tr, _ := json.Marshal(portable.Trailer{Kind: portable.KindTrailer, Counts: counts, Lines: int64(len(lines)),
		SHA256: hex.EncodeToString(sum.Sum(nil)), Complete: true})
	return []byte(strings.Join(lines, "\n") + "\n" + string(tr) + "\n")
}

// TestImportOrphanRecordIsRefused: a message whose session line is not in
// the file is a 422-class ValidationError naming the line (an import brings
// whole sessions), and nothing of that owner is written.
func TestImportOrphanRecordIsRefused(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	body := exportAll(t, a, "alice", false, 0)
	var kept []string
	for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if !strings.HasPrefix(l, `{"kind" : "session"`) && !strings.HasPrefix(l, `{"kind":"trailer"`) {
			kept = append(kept, l)
		}
	}
	b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
	_, err := b.store.Import(ctx(t), ImportRequest{Body: retrailer(t, kept), Embedder: testExportInfo.Embedder})
	v, ok := IsValidation(err)
	if !ok || !strings.HasSuffix(v.Fields[0].Field, "].sessionId") || !strings.Contains(v.Fields[0].Message, "whole sessions") {
		t.Fatalf("import of messages without their session: %v", err)
	}
	holdsNoRows(t, b, "a refused owner", b.store.sql.memories, b.store.sql.messages, b.store.sql.history)
}

// TestImportKeepsGlobalMemoriesGlobal: a tenant-wide memory goes only into
// a runtime where its category is global too; elsewhere its line is a
// ValidationError naming the category, and nothing is written.
func TestImportKeepsGlobalMemoriesGlobal(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	b := newFixture(t, inDatabaseOf(a), withPolicy(func(p *Policy) {
		p.Categories = append(p.Categories, Category{Name: "org", Priority: 1}) // not global here
	}))
	_, err := b.store.Import(ctx(t), ImportRequest{Body: exportAll(t, a, "", false, 0), Embedder: testExportInfo.Embedder})
	v, ok := IsValidation(err)
	if !ok || len(v.Fields) != 1 || !strings.HasSuffix(v.Fields[0].Field, "].category") || !strings.Contains(v.Fields[0].Message, "not a global category") {
		t.Fatalf("import of a global memory into a runtime where its category is not global: %v", err)
	}
	if n := rowsOf(t, b, b.store.sql.memories); n != 0 {
		t.Errorf("%d memories written", n)
	}
}

// TestExportImportIntoCitus: a tenant of plain PostgreSQL exported and
// imported into a tenant on Citus (a distributed schema), then exported
// from Citus: the same records.
func TestExportImportIntoCitus(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 100)
	body := exportAll(t, a, "", true, 0)
	b := newFixture(t, withGlobalCategory(), func(s *fixtureSettings) { s.adminURL = testenv.NewCitusDatabase(t) })
	importInto(t, b, body, false)
	sameLines(t, "plain vs Citus", dataLines(t, body), dataLines(t, exportAll(t, b, "", true, 40)))
	if again := importInto(t, b, body, false); again.Inserted[portable.KindMemory] != 0 || again.Inserted[portable.KindHistory] != 0 {
		t.Errorf("second import into Citus inserted %+v", again.Inserted)
	}
}

// forgedCursor is a cursor of kind k (an index of RecordKinds) at key.
func forgedCursor(owner string, k int, key ...string) string {
	b, _ := json.Marshal(map[string]any{"o": owner, "k": k, "a": key})
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestExportRefusesForgedCursors: a cursor whose key does not fit its
// kind's key types (a memory key that is no UUID, a seq that is no number,
// an owner with NUL) is a ValidationError naming `after`, with nothing
// written; before, the key reached the query and failed it after the
// header, which cut the stream.
func TestExportRefusesForgedCursors(t *testing.T) {
	f := newFixture(t, withGlobalCategory())
	seedRich(t, f, 20)
	memoryKind := slices.Index(portable.RecordKinds, portable.KindMemory)
	messageKind := slices.Index(portable.RecordKinds, portable.KindMessage)
	for _, after := range []string{
		forgedCursor("alice", memoryKind, "not-a-uuid"),
		forgedCursor("alice", messageKind, "long", "seven"),
		forgedCursor("alice", messageKind, "long"),
		forgedCursor("al\x00ice", memoryKind),
		forgedCursor("alice", messageKind, "lo\x00ng", "1"),
	} {
		var out bytes.Buffer
		_, err := f.store.Export(ctx(t), ExportRequest{After: after, Info: testExportInfo}, &out, func() error { return nil })
		if v, ok := IsValidation(err); !ok || v.Fields[0].Field != "after" || out.Len() != 0 {
			t.Errorf("cursor %s: %v, %d bytes written", after, err, out.Len())
		}
	}
	// A real cursor still resumes.
	if body := exportAll(t, f, "", false, 7); !bytes.Contains(body, []byte(`"complete":true`)) {
		t.Error("resumed export incomplete")
	}
}

// TestImportLeavesHeldUnitsWhole: a session (with its messages, summaries
// and episode) or a document (with its changelog) the tenant holds already
// is left exactly as it is, so its counters and versions still match what
// hangs from it; the rest of the owner is imported.
func TestImportLeavesHeldUnitsWhole(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	body := exportAll(t, a, "alice", false, 0)
	b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
	b.newSession("alice", "chat")
	b.appendTurn("alice", "chat", TurnMessage{Role: RoleUser, Content: "B's own first message"})
	if _, err := b.store.PutDocument(ctx(t), PutDocumentRequest{Owner: "alice", Kind: DocProfile, Content: "B's own profile", Source: SourceUser}); err != nil {
		t.Fatal(err)
	}
	res := importInto(t, b, body, false)
	sess, err := b.store.GetSession(ctx(t), "alice", "chat")
	if err != nil || sess.MessageCount != 1 {
		t.Fatalf("B's session after the import: %+v, %v", sess, err)
	}
	var msgs, changes int64
	if err := b.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+b.store.sql.messages+` WHERE session_id = 'chat'`).Scan(&msgs); err != nil || msgs != 1 {
		t.Errorf("B's session holds %d messages (%v), want its own 1", msgs, err)
	}
	if err := b.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+b.store.core.Table("document_changes")+` WHERE kind = 'profile'`).Scan(&changes); err != nil || changes != 1 {
		t.Errorf("B's profile has %d changelog versions (%v), want its own 1", changes, err)
	}
	if res.Existing[portable.KindMessage] != 6 || res.Existing[portable.KindEpisode] != 1 || res.Existing[portable.KindDocumentChange] != 2 {
		t.Errorf("existing %+v: want the chat session's 6 messages and episode, the profile's 2 changes", res.Existing)
	}
	if res.Inserted[portable.KindMessage] != 1500 || res.Inserted[portable.KindSummary] == 0 || res.Inserted[portable.KindMemory] == 0 {
		t.Errorf("inserted %+v: want the long session and the memories", res.Inserted)
	}
}

// TestImportHistoryOfAnotherOwnersMemoryIsRefused: a file whose owner
// mallory lists history for alice's memory (same tenant) is refused naming
// the line's memoryId, and no history row is hung on alice's memory.
func TestImportHistoryOfAnotherOwnersMemoryIsRefused(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	var kept []string
	taken := false
	for _, l := range strings.Split(strings.TrimSuffix(string(exportAll(t, a, "alice", false, 0)), "\n"), "\n") {
		var env struct{ Kind string }
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			t.Fatal(err)
		}
		switch {
		case env.Kind == portable.KindHistory && !taken:
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatal(err)
			}
			rec["owner"] = "mallory"
			forged, _ := json.Marshal(rec)
			kept, taken = append(kept, string(forged)), true
		case env.Kind == portable.KindHistory, env.Kind == portable.KindTrailer:
		case env.Kind == portable.KindHeader: // a part of mallory's
			var h map[string]any
			if err := json.Unmarshal([]byte(l), &h); err != nil {
				t.Fatal(err)
			}
			h["owner"] = "mallory"
			header, _ := json.Marshal(h)
			kept = append(kept, string(header))
		}
	}
	if !taken || !strings.Contains(kept[len(kept)-1], `"owner":"mallory"`) {
		t.Fatalf("no history line to forge in %d lines", len(kept))
	}
	_, err := a.store.Import(ctx(t), ImportRequest{Body: retrailer(t, kept), Embedder: testExportInfo.Embedder})
	v, ok := IsValidation(err)
	if !ok || !strings.HasSuffix(v.Fields[0].Field, "].memoryId") || !strings.Contains(v.Fields[0].Message, "another owner's") {
		t.Fatalf("import of history for another owner's memory: %v", err)
	}
	var n int64
	if err := a.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+a.store.sql.history+` WHERE owner_id = 'mallory'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("history rows of mallory: %d (%v), want none", n, err)
	}
}

// TestImportVectorWithoutDirectionIsRefused: an imported vector of zeros
// (or of values whose squares vanish in float32) would make every search
// of its owner fail, as a client's would; it is a 422 naming the line's
// embedding, and nothing of the owner is written.
func TestImportVectorWithoutDirectionIsRefused(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 20)
	for name, value := range map[string]float32{"zeros": 0, "vanishing squares": 1e-30} {
		t.Run(name, func(t *testing.T) {
			var lines []string
			forged := false
			for _, l := range strings.Split(strings.TrimSuffix(string(exportAll(t, a, "alice", true, 0)), "\n"), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatal(err)
				}
				switch {
				case rec["kind"] == portable.KindTrailer:
					continue
				case rec["kind"] == portable.KindMemory && !forged:
					vec := rec["embedding"].([]any)
					for i := range vec {
						vec[i] = value
					}
					b, _ := json.Marshal(rec)
					l, forged = string(b), true
				}
				lines = append(lines, l)
			}
			b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
			_, err := b.store.Import(ctx(t), ImportRequest{Body: retrailer(t, lines), Embedder: testExportInfo.Embedder})
			v, ok := IsValidation(err)
			if !ok || !strings.HasSuffix(v.Fields[0].Field, "].embedding") {
				t.Fatalf("import of a vector without direction: %v", err)
			}
			if n := rowsOf(t, b, b.store.sql.memories); n != 0 {
				t.Errorf("%d memories written", n)
			}
		})
	}
}
