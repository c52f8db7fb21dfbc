package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/portable"
	"github.com/engram-dev/engram/internal/testenv"
)

// withGlobalCategory adds a tenant-wide category "org" to the policy.
func withGlobalCategory() fixtureOption {
	return withPolicy(func(p *Policy) {
		p.Limits.MaxMemoriesPerOwner = 2000 // the bulk owner stays whole
		p.Categories = append(p.Categories, Category{Name: "org", Priority: 1, Global: true})
	})
}

var testExportInfo = ExportInfo{EngramVersion: "test", Embedder: ExportEmbedder{Provider: "builtin", Dimensions: 384}, Policy: "default"}

// seedRich gives f every record kind: alice with bulk memories (n) plus
// ones with history, a supersede chain, a deleted one, access statistics,
// a long session compacted into a summary DAG, an ended session (episode),
// profile and constraints with two versions each and a snapshot; bob with
// a few memories; and a tenant-wide memory.
func seedRich(t *testing.T, f *fixture, n int) {
	t.Helper()
	n -= 4 // alice's memories written through Add below
	rows := make([][]any, n)
	emb := f.store.core.Embedder
	texts := make([]string, n)
	for i := range n {
		texts[i] = fmt.Sprintf("bulk fact %d about project %d and topic %d", i, i%37, i%101)
	}
	vecs, err := emb.Embed(ctx(t), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rows[i] = []any{core.NewID(), "alice", "agent", "project", texts[i], pgv.NewVector(vecs[i])}
	}
	f.copyMemories(t, rows)
	a := f.add(AddRequest{Owner: "alice", Content: "Alice prefers tea over coffee", Category: "preference", Source: SourceUser})
	b := f.add(AddRequest{Owner: "alice", Content: "Alice moved to Lisbon in 2024", Category: "identity", Source: SourceUser})
	c := f.add(AddRequest{Owner: "alice", Content: "Alice lives in Porto", Category: "identity", Source: SourceUser})
	if _, err := f.store.Supersede(ctx(t), "alice", c.Memory.ID, b.Memory.ID, SourceUser); err != nil {
		t.Fatalf("supersede: %v", err)
	}
	if _, err := f.store.Update(ctx(t), UpdateRequest{Owner: "alice", ID: a.Memory.ID, Content: strPtr("Alice prefers green tea"), Source: SourceUser}); err != nil {
		t.Fatalf("update: %v", err)
	}
	d := f.add(AddRequest{Owner: "alice", Content: "A temporary note to forget", Category: "contextual"})
	if err := f.store.Delete(ctx(t), "alice", d.Memory.ID, SourceAgent); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.access+` (memory_id, owner_id, access_count, last_accessed_at) VALUES ($1, 'alice', 3, now())`, a.Memory.ID); err != nil {
		t.Fatal(err)
	}
	f.add(AddRequest{Owner: "bob", Content: "Bob is allergic to peanuts", Category: "identity", Source: SourceUser})
	f.add(AddRequest{Owner: "bob", Content: "Bob works on the billing service", Category: "project"})
	f.add(AddRequest{Owner: "alice", Content: "The company holiday is on 1 May", Category: "org", Source: SourceSystem})

	f.seedMessages("alice", "long", 1500)
	if res, err := f.store.CompactSession(ctx(t), CompactSessionRequest{Owner: "alice", SessionID: "long", Mode: CompactFull}); err != nil || res.CondensedCreated == 0 {
		t.Fatalf("compaction into a DAG: %+v, %v", res, err)
	}
	f.newSession("alice", "chat")
	for i := range 3 {
		f.appendTurn("alice", "chat", TurnMessage{Role: RoleUser, Content: fmt.Sprintf("Question %d about the trip to Japan?", i)},
			TurnMessage{Role: RoleAssistant, Content: fmt.Sprintf("Answer %d: book the train early.", i)})
	}
	for _, doc := range []struct {
		kind    DocumentKind
		content string
	}{{DocProfile, "Alice, engineer"}, {DocProfile, "Alice, staff engineer"}, {DocConstraints, "No meetings on Friday"}, {DocConstraints, "No meetings on Friday or Monday"}} {
		if _, err := f.store.PutDocument(ctx(t), PutDocumentRequest{Owner: "alice", Kind: doc.kind, Content: doc.content, Source: SourceUser}); err != nil {
			t.Fatalf("put document: %v", err)
		}
	}
	if _, err := f.store.AdvanceSnapshot(ctx(t), "alice", "chat"); err != nil {
		t.Fatalf("advance snapshot: %v", err)
	}
	if res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "alice", SessionID: "chat"}); err != nil || res.Episode == nil {
		t.Fatalf("end session: %+v, %v", res, err)
	}
}

// rowsOf counts the rows of table, as admin.
func rowsOf(t *testing.T, f *fixture, table string) int64 {
	t.Helper()
	var n int64
	if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func strPtr(s string) *string { return &s }

// exportAll exports scope (owner "" = tenant) in parts of pageRows rows
// ending after their first page, resuming from each trailer, and returns
// the parts concatenated.
func exportAll(t *testing.T, f *fixture, owner string, vectors bool, pageRows int) []byte {
	t.Helper()
	var out bytes.Buffer
	after := ""
	for part := 0; ; part++ {
		if part > 10_000 {
			t.Fatal("the export never completes")
		}
		req := ExportRequest{Owner: owner, Vectors: vectors, After: after, Info: testExportInfo, PageRows: pageRows}
		if pageRows > 0 {
			req.StopAt = time.Now().Add(-time.Second) // every part ends after one page
		}
		tr, err := f.store.Export(ctx(t), req, &out, func() error { return nil })
		if err != nil {
			t.Fatalf("export part %d: %v", part, err)
		}
		if tr.Complete {
			return out.Bytes()
		}
		after = tr.Next
	}
}

// dataLines are the data records of an export, per-tenant lines left out
// (headers, checkpoints, trailers).
func dataLines(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		var env struct{ Kind string }
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		switch env.Kind {
		case portable.KindHeader, portable.KindCheckpoint, portable.KindTrailer:
			continue
		}
		out = append(out, l)
	}
	return out
}

// kindLines are the records of one kind of an export.
func kindLines(t *testing.T, body []byte, kind string) []string {
	t.Helper()
	var out []string
	for _, l := range dataLines(t, body) {
		if strings.HasPrefix(l, `{"kind" : "`+kind+`"`) {
			out = append(out, l)
		}
	}
	return out
}

func importInto(t *testing.T, f *fixture, body []byte, dry bool) *ImportResult {
	t.Helper()
	res, err := f.store.Import(ctx(t), ImportRequest{Body: body, DryRun: dry, Embedder: testExportInfo.Embedder})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return res
}

func sameLines(t *testing.T, what string, a, b []string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d records, then %d", what, len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("%s: record %d differs:\n%s\n%s", what, i, a[i], b[i])
		}
	}
}

// TestExportImportRoundTrip: tenant A with every record kind, exported in
// resumed parts, imported into an empty tenant B, exported again: the same
// records, byte for byte; a second import changes nothing.
func TestExportImportRoundTrip(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 2000)
	one := exportAll(t, a, "", true, 0)
	parts := exportAll(t, a, "", true, 150)
	sameLines(t, "one part vs resumed parts", dataLines(t, one), dataLines(t, parts))
	kinds := map[string]int{}
	for _, l := range dataLines(t, one) {
		var env struct{ Kind, Owner string }
		_ = json.Unmarshal([]byte(l), &env)
		kinds[env.Kind]++
	}
	for _, k := range portable.RecordKinds {
		if kinds[k] == 0 {
			t.Errorf("the rich export holds no %s record", k)
		}
	}
	if kinds[portable.KindMemory] < 2000+3 { // alice's 2,000, bob's 2, the tenant-wide one
		t.Errorf("%d memories exported", kinds[portable.KindMemory])
	}

	b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
	res := importInto(t, b, parts, false)
	t.Logf("import: %+v", res)
	for _, k := range portable.RecordKinds {
		if res.Inserted[k] != int64(kinds[k]) || res.Existing[k] != 0 {
			t.Errorf("%s: %d inserted, %d existing; want %d, 0", k, res.Inserted[k], res.Existing[k], kinds[k])
		}
	}
	sameLines(t, "A vs B", dataLines(t, one), dataLines(t, exportAll(t, b, "", true, 0)))

	again := importInto(t, b, parts, false)
	for _, k := range portable.RecordKinds {
		if again.Inserted[k] != 0 {
			t.Errorf("second import inserted %d %s records", again.Inserted[k], k)
		}
	}
	sameLines(t, "B after a second import", dataLines(t, one), dataLines(t, exportAll(t, b, "", true, 0)))
}

// TestImportReembedsWithoutVectors: an export without vectors is embedded
// on the way in; the builtin embedder is deterministic, so the vectors
// are those of the source.
func TestImportReembedsWithoutVectors(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 100)
	b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
	res := importInto(t, b, exportAll(t, a, "", false, 0), false)
	if res.Embedded == 0 {
		t.Fatal("nothing embedded on the way in")
	}
	// Seeded messages have no vector in A; B embeds every message, so
	// memories are what is compared.
	sameLines(t, "A vs B memories with vectors", kindLines(t, exportAll(t, a, "", true, 0), portable.KindMemory),
		kindLines(t, exportAll(t, b, "", true, 0), portable.KindMemory))
}

// TestImportBadLineWritesNothing: one invalid field on one line is a
// ValidationError naming lines[N].field, and no row is written.
func TestImportBadLineWritesNothing(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 50)
	body := exportAll(t, a, "alice", false, 0)
	lines := strings.Split(string(body), "\n")
	bad := -1
	for i, l := range lines {
		if strings.Contains(l, `"kind" : "memory"`) || strings.HasPrefix(l, `{"kind" : "memory"`) {
			lines[i] = strings.Replace(l, `"importance" : `, `"importance" : 1`, 1) // 5 -> 15
			bad = i + 1
			break
		}
	}
	if bad < 0 {
		t.Fatalf("no memory line in %.300s", body)
	}
	b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
	_, err := b.store.Import(ctx(t), ImportRequest{Body: []byte(strings.Join(lines, "\n")), Embedder: testExportInfo.Embedder})
	v, ok := IsValidation(err)
	if !ok {
		t.Fatalf("import of a bad line: %v", err)
	}
	want := fmt.Sprintf("lines[%d].importance", bad)
	found := false
	for _, fe := range v.Fields {
		found = found || fe.Field == want
	}
	if !found {
		t.Fatalf("errors %+v do not name %s", v.Fields, want)
	}
	for _, table := range []string{b.store.sql.memories, b.store.sql.sessions, b.store.sql.messages} {
		if n := rowsOf(t, b, table); n != 0 {
			t.Errorf("%s holds %d rows after a refused import", table, n)
		}
	}
}

// TestImportDryRunWritesNothing: a dry run counts what it would insert
// and writes nothing.
func TestImportDryRunWritesNothing(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 50)
	body := exportAll(t, a, "", false, 0)
	b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
	res := importInto(t, b, body, true)
	if !res.DryRun || res.Inserted[portable.KindMemory] == 0 || res.Embedded == 0 {
		t.Fatalf("dry run result %+v", res)
	}
	for _, table := range []string{b.store.sql.memories, b.store.sql.sessions, b.store.sql.messages, b.store.sql.history} {
		if n := rowsOf(t, b, table); n != 0 {
			t.Errorf("%s holds %d rows after a dry run", table, n)
		}
	}
}

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

// TestImportOrphanRecordIsRefused: a message whose session neither the
// file nor the tenant holds is a 422-class ValidationError naming the
// owner (not a 500), and nothing of that owner is written.
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
	if !ok || v.Fields[0].Field != "owners[alice]" {
		t.Fatalf("import of messages without their session: %v", err)
	}
	for _, table := range []string{b.store.sql.memories, b.store.sql.messages, b.store.sql.history} {
		if n := rowsOf(t, b, table); n != 0 {
			t.Errorf("%s holds %d rows after a refused owner", table, n)
		}
	}
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
