package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ReadRepoFile returns the file of the repository at rel (a slash path
// from its root), failing the test when it cannot be read.
func ReadRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return b
}

// usageFlag is a flag's line in a flag set's -h text.
var usageFlag = regexp.MustCompile(`(?m)^\s+-([a-z-]+)`)

// FlagsDocumented fails the test for each flag of usage (the -h text of
// command) that docs/configuration.md does not name as `--flag`, and when
// usage lists fewer than atLeast flags (then it is not the text meant).
// It returns the page, for the caller's further checks.
func FlagsDocumented(t testing.TB, command, usage string, atLeast int) string {
	t.Helper()
	flags := usageFlag.FindAllStringSubmatch(usage, -1)
	if len(flags) < atLeast {
		t.Fatalf("found %d flags in the usage text of %s:\n%s", len(flags), command, usage)
	}
	doc := string(ReadRepoFile(t, "docs/configuration.md"))
	for _, f := range flags {
		if !strings.Contains(doc, "`--"+f[1]) {
			t.Errorf("docs/configuration.md does not document --%s of %s", f[1], command)
		}
	}
	return doc
}
