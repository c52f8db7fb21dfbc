package memory

import (
	"encoding/json"
	"strings"
	"testing"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/portable"
)

// vectorKinds are the record kinds that carry a vector.
var vectorKinds = []string{portable.KindMessage, portable.KindSummary, portable.KindEpisode, portable.KindMemory}

// withHeaderEmbedder rewrites a one-part export with vectors: the header
// names embedder, and every record of a kind with a vector gets one of
// dims dimensions pointing along the first axis (what no builtin vector
// is), so the test sees whether an import kept it. The trailer (counts,
// lines, SHA-256) is rebuilt. It returns the file and how many records of
// each kind now carry a foreign vector.
func withHeaderEmbedder(t *testing.T, body []byte, embedder portable.Embedder, dims int) ([]byte, map[string]int) {
	t.Helper()
	var lines []string
	foreign := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		kind, _ := rec["kind"].(string)
		switch {
		case kind == portable.KindTrailer:
			continue
		case kind == portable.KindHeader:
			rec["embedder"] = embedder
		case isVectorKind(kind):
			rec["embedding"] = foreignVector(dims)
			foreign[kind]++
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	return retrailer(t, lines), foreign
}

func isVectorKind(kind string) bool {
	for _, k := range vectorKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// foreignVector is the unit vector along the first axis, of dims dimensions.
func foreignVector(dims int) []float32 {
	v := make([]float32, dims)
	v[0] = 1
	return v
}

// storedVector is one stored vector and the text it is made from.
type storedVector struct {
	kind, text string
	vec        []float32
}

// storedVectors reads every vector of f's tenant with its text, as admin.
func storedVectors(t *testing.T, f *fixture) []storedVector {
	t.Helper()
	var out []storedVector
	for _, src := range []struct{ kind, table, text string }{
		{portable.KindMessage, f.store.sql.messages, "content"},
		{portable.KindSummary, f.store.sql.summaries, "content"},
		{portable.KindEpisode, f.store.sql.episodes, "summary"},
		{portable.KindMemory, f.store.sql.memories, "content"},
	} {
		rows, err := f.admin.Query(ctx(t), `SELECT `+src.text+`, embedding FROM `+src.table+` WHERE embedding IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var text string
			var v pgv.Vector
			if err := rows.Scan(&text, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, storedVector{kind: src.kind, text: text, vec: v.Slice()})
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkTargetVectors asserts every stored vector of f is f's embedder's
// vector of its text (embedded again here), none is the file's foreign
// one, and returns how many there are of each kind.
func checkTargetVectors(t *testing.T, f *fixture, foreignDims int) map[string]int {
	t.Helper()
	stored := storedVectors(t, f)
	texts := make([]string, len(stored))
	for i, s := range stored {
		texts[i] = s.text
	}
	want, err := f.store.core.Embedder.Embed(ctx(t), texts)
	if err != nil {
		t.Fatal(err)
	}
	bad := foreignVector(foreignDims)
	perKind := map[string]int{}
	for i, s := range stored {
		perKind[s.kind]++
		if sameVector(s.vec, bad) {
			t.Errorf("%s %.40q kept the file's foreign vector", s.kind, s.text)
			continue
		}
		if !sameVector(s.vec, want[i]) {
			t.Errorf("%s %.40q: the stored vector is not the target embedder's vector of its text", s.kind, s.text)
		}
	}
	return perKind
}

func sameVector(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-6 || d < -1e-6 {
			return false
		}
	}
	return true
}

// TestImportReembedsVectorsOfAnotherEmbedder (issue 29, E14): an export
// whose vectors were made by another embedder (another model of the same
// size, or another size) is embedded again on the way in: the import
// reports every vector record as embedded, each stored vector (memories,
// messages, summaries, episodes) is the target embedder's vector of its
// text, embedded again here, and none is the file's. The control (the
// file names the target's embedder) keeps the file's vectors, so the test
// can tell kept vectors from computed ones.
func TestImportReembedsVectorsOfAnotherEmbedder(t *testing.T) {
	a := newFixture(t, withGlobalCategory())
	seedRich(t, a, 60)
	src := exportAll(t, a, "", true, 0)
	want := kindLines(t, src, portable.KindMemory)
	target := testExportInfo.Embedder
	cases := []struct {
		name     string
		embedder portable.Embedder
		dims     int
		reembeds bool
	}{
		{"another model, same dimensions", portable.Embedder{Provider: "openai", Model: "text-embedding-3-small", Dimensions: 384}, 384, true},
		{"another size", portable.Embedder{Provider: "openai", Model: "text-embedding-3-large", Dimensions: 1024}, 1024, true},
		{"the builtin embedder at another size", portable.Embedder{Provider: "builtin", Dimensions: 768}, 768, true},
		{"control: the target's embedder", target, 384, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newFixture(t, withGlobalCategory(), inDatabaseOf(a))
			file, foreign := withHeaderEmbedder(t, src, c.embedder, c.dims)
			for _, k := range vectorKinds {
				if foreign[k] == 0 {
					t.Fatalf("the file holds no %s with a vector: the test would not cover that kind", k)
				}
			}
			res := importInto(t, b, file, false)
			if res.Inserted[portable.KindMemory] != int64(len(want)) {
				t.Fatalf("%d memories inserted, want %d", res.Inserted[portable.KindMemory], len(want))
			}
			if !c.reembeds {
				if res.Embedded != 0 {
					t.Errorf("the control embedded %d records; its vectors are the target's", res.Embedded)
				}
				got := kindLines(t, exportAll(t, b, "", true, 0), portable.KindMemory)
				if len(got) != len(want) || got[0] == want[0] {
					t.Fatalf("the control kept no vector of the file: the test cannot tell kept vectors from computed ones")
				}
				return
			}
			perKind := checkTargetVectors(t, b, c.dims)
			stored := 0
			for _, k := range vectorKinds {
				stored += perKind[k]
				if int64(perKind[k]) != res.Inserted[k] {
					t.Errorf("%d %s records stored with a vector, %d inserted", perKind[k], k, res.Inserted[k])
				}
			}
			if res.Embedded != int64(stored) {
				t.Errorf("the import reports %d records embedded; %d vectors are stored", res.Embedded, stored)
			}
			// The builtin embedder is deterministic: re-embedded memories
			// are A's, byte for byte.
			sameLines(t, "A's memories vs the re-embedded import", want,
				kindLines(t, exportAll(t, b, "", true, 0), portable.KindMemory))
		})
	}
}
