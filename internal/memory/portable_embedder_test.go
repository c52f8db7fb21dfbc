package memory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/portable"
)

// withHeaderEmbedder rewrites a one-part export with vectors: the header
// names embedder, and every memory's vector becomes one of dims
// dimensions pointing along the first axis (what no builtin vector is), so
// the test sees whether an import kept it. The trailer is rebuilt.
func withHeaderEmbedder(t *testing.T, body []byte, embedder portable.Embedder, dims int) []byte {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		switch rec["kind"] {
		case portable.KindTrailer:
			continue
		case portable.KindHeader:
			rec["embedder"] = embedder
		case portable.KindMemory:
			vec := make([]float32, dims)
			vec[0] = 1
			rec["embedding"] = vec
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	return retrailer(t, lines)
}

// TestImportReembedsVectorsOfAnotherEmbedder: an export whose vectors were
// made by another embedder (another model of the same size, or another
// size) is embedded again on the way in: the imported memories carry the
// target's vectors, not the file's. The control (the file names the
// target's embedder) keeps the file's vectors, so the test can tell.
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
			res := importInto(t, b, withHeaderEmbedder(t, src, c.embedder, c.dims), false)
			if res.Inserted[portable.KindMemory] != int64(len(want)) {
				t.Fatalf("%d memories inserted, want %d", res.Inserted[portable.KindMemory], len(want))
			}
			got := kindLines(t, exportAll(t, b, "", true, 0), portable.KindMemory)
			if !c.reembeds {
				if len(got) != len(want) || got[0] == want[0] {
					t.Fatalf("the control kept no vector of the file: the test cannot tell kept vectors from computed ones")
				}
				return
			}
			if res.Embedded < int64(len(want)) {
				t.Errorf("%d records embedded on the way in, want at least the %d memories", res.Embedded, len(want))
			}
			// The builtin embedder is deterministic: re-embedded memories
			// are A's, byte for byte.
			sameLines(t, "A's memories vs the re-embedded import", want, got)
		})
	}
}
