package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/portable"
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
	f.add(AddRequest{Owner: "bob", Content: "Bob works on the billing service", Category: "project",
		Metadata: json.RawMessage(`{"team":"billing","since":2021}`), Tags: []string{"work", "billing"}})
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
// holdsNoRows fails the test for each of tables that holds a row after
// what (a refused import, a dry run).
func holdsNoRows(t *testing.T, f *fixture, after string, tables ...string) {
	t.Helper()
	for _, table := range tables {
		if n := rowsOf(t, f, table); n != 0 {
			t.Errorf("%s holds %d rows after %s", table, n, after)
		}
	}
}

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
	if !strings.Contains(string(one), `"metadata" : {"team": "billing", "since": 2021}, "tags" : ["work","billing"]`) {
		t.Error("the export lost a memory's metadata and tags")
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
	holdsNoRows(t, b, "a refused import", b.store.sql.memories, b.store.sql.sessions, b.store.sql.messages)
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
	holdsNoRows(t, b, "a dry run", b.store.sql.memories, b.store.sql.sessions, b.store.sql.messages, b.store.sql.history)
}
