package textguard

import (
	"runtime"
	"strings"
	"testing"
)

// TestRedactDoesNotCopyTextWithoutSecrets (issue 26, twenty-second
// review): every pattern's ReplaceAllStringFunc copied the whole text even
// when it found nothing, so redacting the 100 stored memories of 64 KiB a
// session extraction's batch dedup quotes allocated about 256 MiB. A text
// without a match is now only read.
func TestRedactDoesNotCopyTextWithoutSecrets(t *testing.T) {
	r, err := NewRedactor(true, []string{`EMP-[0-9]{6}`})
	if err != nil {
		t.Fatal(err)
	}
	text := "memo 7 topic7 " + strings.Repeat("<", 64<<10)
	// Bytes, not allocations: the regexp machines a match needs come from
	// a sync.Pool, which -race empties at random. Before, a run allocated
	// two copies of the text per pattern (about 2.8 MiB here); now the
	// machines only (40 to 90 KiB): the bound is four copies.
	const runs = 5
	out := r.Redacted(text)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		out = r.Redacted(text)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4*uint64(len(text)) {
		t.Errorf("redacting a text of %d bytes without secrets allocated %d bytes, want it read, not copied", len(text), per)
	}
	if out != text {
		t.Fatal("a text without secrets was changed")
	}
	if got := r.Redacted(text + " EMP-123456"); !strings.HasSuffix(got, " [REDACTED:custom]") {
		t.Fatalf("a secret after the text was not redacted: %q", got[len(got)-40:])
	}
}
