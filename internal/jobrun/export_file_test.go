package jobrun

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestExportFileIsNeverHalfUnderItsFinalName: while an export is written
// only a dot-file named partial exists; Commit renames it to the final
// name; Abort removes it, leaving nothing.
func TestExportFileIsNeverHalfUnderItsFinalName(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := openFile(dir, "", "", "t-20260101T000000Z.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, 3*fileBuffer)); err != nil { // past the buffer: bytes on disk
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{".t-20260101T000000Z.jsonl.partial"}) {
		t.Fatalf("while writing, the directory holds %v", got)
	}
	loc, err := s.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"t-20260101T000000Z.jsonl"}) || loc != "file://"+filepath.Join(dir, "t-20260101T000000Z.jsonl") {
		t.Fatalf("after commit: %v at %s", got, loc)
	}

	s, err = openFile(dir, "backups", "engram", "t-20260102T000000Z.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"t-20260101T000000Z.jsonl"}) {
		t.Fatalf("after abort: %v", got)
	}
	if _, err := openFile(filepath.Join(dir, "missing"), "", "", "x.jsonl"); err == nil {
		t.Fatal("a directory that does not exist was accepted")
	}
}
