package workload

import (
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestDocumentedConfigParses keeps the example of docs/configuration.md
// valid: it must load, and equal the defaults it claims to show.
func TestDocumentedConfigParses(t *testing.T) {
	doc := testenv.ReadRepoFile(t, "docs/configuration.md")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no yaml block in docs/configuration.md")
	}
	cfg, err := ParseServiceConfigYAML(m[1])
	if err != nil {
		t.Fatalf("the documented config does not load: %v", err)
	}
	def := memory.DefaultPolicy()
	if cfg.Schema != "engram_team_a_support_bot" || cfg.Embedding.Dimensions != 384 || cfg.LLM != nil {
		t.Fatalf("parsed %+v", cfg)
	}
	if got, want := mustJSON(t, cfg.Policy), mustJSON(t, def); got != want {
		t.Fatalf("the documented policy differs from memory.DefaultPolicy():\n%s\n%s", got, want)
	}
}

func TestParseServiceConfigYAMLErrors(t *testing.T) {
	good := "schema: s\nembedding: {provider: builtin, dimensions: 64}\npolicy:\n" + indent(mustYAMLPolicy(t))
	if _, err := ParseServiceConfigYAML([]byte(good)); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", good + "replicas: 3\n", "unknown field"},
		{"not YAML", "schema: [", "YAML"},
		{"invalid policy", strings.Replace(good, "autoMergeThreshold: 0.95", "autoMergeThreshold: 3", 1), "dedup"},
		{"bare zero duration", strings.Replace(good, `ttl: "0"`, "ttl: 0", 1), "duration"},
		{"no schema", strings.Replace(good, "schema: s\n", "", 1), "schema"},
	} {
		if _, err := ParseServiceConfigYAML([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := LoadServiceConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "reading config file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	l, err := NewLogger(&b, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown")
	if strings.Contains(b.String(), "hidden") || !strings.Contains(b.String(), `"msg":"shown"`) {
		t.Fatalf("log = %q", b.String())
	}
	if _, err := NewLogger(&b, "loud", "json"); err == nil {
		t.Error("level loud accepted")
	}
	if _, err := NewLogger(&b, "info", "xml"); err == nil {
		t.Error("format xml accepted")
	}
}

// TestWriteServiceConfigRoundTrip: what tests and the benchmark write is
// what `manager serve` and `manager job` load.
func TestWriteServiceConfigRoundTrip(t *testing.T) {
	want := memory.ServiceConfig{Schema: "engram_roundtrip", Policy: memory.DefaultPolicy(),
		Embedding: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: 64}, AsynchronousCommit: true}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := WriteServiceConfig(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := LoadServiceConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Schema != want.Schema || got.Embedding != want.Embedding || !got.AsynchronousCommit || !reflect.DeepEqual(got.Policy, want.Policy) {
		t.Errorf("loaded %+v, wrote %+v", got, want)
	}
	if err := WriteServiceConfig(filepath.Join(t.TempDir(), "missing", "config.yaml"), want); err == nil || !strings.Contains(err.Error(), "writing the service config") {
		t.Errorf("writing into a missing directory: %v", err)
	}
}
