package server

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return string(b)
}

// TestServeFlagsDocumented fails when a flag of `manager serve` or one of
// its environment variables is missing from docs/configuration.md.
func TestServeFlagsDocumented(t *testing.T) {
	var usage bytes.Buffer
	if _, err := ParseFlags([]string{"-h"}, func(string) string { return "" }, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	flags := regexp.MustCompile(`(?m)^\s+-([a-z-]+)`).FindAllStringSubmatch(usage.String(), -1)
	if len(flags) < 10 {
		t.Fatalf("found %d flags in the usage text:\n%s", len(flags), usage.String())
	}
	doc := readRepoFile(t, "docs/configuration.md")
	for _, f := range flags {
		if !strings.Contains(doc, "`--"+f[1]) {
			t.Errorf("docs/configuration.md does not document --%s of manager serve", f[1])
		}
	}
	for _, env := range []string{naming.EnvDatabaseURL, naming.EnvEmbeddingAPIKey, naming.EnvLLMAPIKey} {
		if !strings.Contains(doc, env) {
			t.Errorf("docs/configuration.md does not document %s", env)
		}
	}
}
