package workload

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/engram-dev/engram/internal/memory"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustYAMLPolicy(t *testing.T) string {
	t.Helper()
	y, err := yaml.Marshal(memory.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
