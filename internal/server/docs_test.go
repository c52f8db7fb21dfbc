package server

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	return string(testenv.ReadRepoFile(t, rel))
}

// TestServeFlagsDocumented fails when a flag of `manager serve` or one of
// its environment variables is missing from docs/configuration.md.
func TestServeFlagsDocumented(t *testing.T) {
	var usage bytes.Buffer
	if _, err := ParseFlags([]string{"-h"}, func(string) string { return "" }, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	doc := testenv.FlagsDocumented(t, "manager serve", usage.String(), 10)
	for _, env := range []string{naming.EnvDatabaseURL, naming.EnvEmbeddingAPIKey, naming.EnvLLMAPIKey} {
		if !strings.Contains(doc, env) {
			t.Errorf("docs/configuration.md does not document %s", env)
		}
	}
}
