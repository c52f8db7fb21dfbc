package memory

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		out  string
	}{
		{"0", 0, "0"}, {"30d", 30 * 24 * time.Hour, "30d"}, {"12h", 12 * time.Hour, "12h"},
		{"90m", 90 * time.Minute, "90m"}, {"2w", 14 * 24 * time.Hour, "2w"}, {"45s", 45 * time.Second, "45s"},
		{"14d", 14 * 24 * time.Hour, "2w"},
	} {
		d, err := ParseDuration(tc.in)
		if err != nil || time.Duration(d) != tc.want || d.String() != tc.out {
			t.Errorf("ParseDuration(%q) = %v (%s), %v; want %v (%s)", tc.in, time.Duration(d), d, err, tc.want, tc.out)
		}
	}
	for _, bad := range []string{"", "d", "30", "-1d", "1.5h", "3y", "abc", "10000000d"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"7d"`), &d); err != nil || d.String() != "1w" {
		t.Errorf("unmarshal 7d = %s, %v", d, err)
	}
	if err := json.Unmarshal([]byte(`7`), &d); err == nil {
		t.Error("a number was accepted as a duration")
	}
}

func TestDefaultPolicyIsValid(t *testing.T) {
	p := DefaultPolicy()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.DefaultCategory() != "contextual" {
		t.Errorf("default category = %q", p.DefaultCategory())
	}
	order := p.RenderOrder()
	if order[0].Name != "identity" || order[len(order)-1].Name != "contextual" {
		t.Errorf("render order = %v", order)
	}
	b, _ := json.Marshal(p)
	var back Policy
	if err := json.Unmarshal(b, &back); err != nil || back.Categories[1].TTL != p.Categories[1].TTL {
		t.Fatalf("policy JSON round trip: %v (%s)", err, b)
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Policy)
		want   string
	}{
		{"no categories", func(p *Policy) { p.Categories = nil }, "categories: at least one"},
		{"bad category name", func(p *Policy) { p.Categories[0].Name = "Bad Name" }, "categories[0].name"},
		{"duplicate category", func(p *Policy) { p.Categories[1].Name = "identity" }, "appears twice"},
		{"thresholds inverted", func(p *Policy) { p.Dedup.ArbitrationThreshold = 0.99 }, "dedup: thresholds"},
		{"threshold zero", func(p *Policy) { p.Dedup.ArbitrationThreshold = 0 }, "dedup: thresholds"},
		{"arbitration mode", func(p *Policy) { p.Dedup.Arbitration = "Maybe" }, "dedup.arbitration"},
		{"weight above one", func(p *Policy) { p.Search.TextWeight = 1.5 }, "search.textWeight"},
		{"weight NaN", func(p *Policy) { p.Search.DecayWeight = math.NaN() }, "search.decayWeight"},
		{"all weights zero", func(p *Policy) { p.Search = Search{DefaultTopK: 10} }, "at least one weight"},
		{"topK over max", func(p *Policy) { p.Search.DefaultTopK = 500 }, "search.defaultTopK"},
		{"unknown text search configuration", func(p *Policy) { p.Search.TextSearchConfig = "klingon" }, `search.textSearchConfig: "klingon" must be one of simple, arabic,`},
		{"text search configuration as SQL", func(p *Policy) { p.Search.TextSearchConfig = "english', x)--" }, "search.textSearchConfig"},
		{"limit zero", func(p *Policy) { p.Limits.MaxContentBytes = 0 }, "limits.maxContentBytes"},
		{"owner above the largest supported", func(p *Policy) { p.Limits.MaxMemoriesPerOwner = 2001 }, "limits.maxMemoriesPerOwner: 2001 is more than the largest owner Engram supports, 2000"},
		{"min decay", func(p *Policy) { p.Forgetting.MinDecayScore = 2 }, "forgetting.minDecayScore"},
		{"guard mode", func(p *Policy) { p.Redaction.InjectionGuard = "Maybe" }, "redaction.injectionGuard"},
		{"regex", func(p *Policy) { p.Redaction.Patterns = []string{"(unclosed"} }, "redaction.patterns[0]: not a valid RE2"},
		{"empty-matching regex", func(p *Policy) { p.Redaction.Patterns = []string{"x*"} }, "matches the empty string"},
		{"half-life far beyond ttl", func(p *Policy) { p.Categories[1].HalfLife = p.Categories[1].TTL * 11 }, "ten times the ttl"},
		{"negative sessions quota", func(p *Policy) { p.Limits.MaxSessionsPerOwner = -1 }, "limits.maxSessionsPerOwner: -1 must be within 1..1000000"},
		{"episodes above the largest", func(p *Policy) { p.Limits.MaxEpisodesPerOwner = 10_001 }, "limits.maxEpisodesPerOwner"},
		{"document versions above the largest", func(p *Policy) { p.Limits.MaxDocumentVersions = 10_001 }, "limits.maxDocumentVersions"},
		{"documents above the largest", func(p *Policy) { p.Limits.MaxDocumentsPerOwner = 10_001 }, "limits.maxDocumentsPerOwner"},
		{"negative history rows per memory", func(p *Policy) { p.Limits.MaxHistoryPerMemory = -1 }, "limits.maxHistoryPerMemory: -1 must be within 1..10000"},
	}
	// A config written before the quotas existed (zero) takes their defaults.
	old := DefaultPolicy()
	old.Limits.MaxSessionsPerOwner, old.Limits.MaxEpisodesPerOwner, old.Limits.MaxDocumentVersions = 0, 0, 0
	old.Limits.MaxDocumentsPerOwner, old.Limits.MaxHistoryPerMemory = 0, 0
	if err := old.Validate(); err != nil {
		t.Fatalf("a policy without quotas: %v", err)
	}
	if l := old.Limits.WithQuotaDefaults(); l != DefaultPolicy().Limits {
		t.Fatalf("quotas resolve to %+v, want the defaults", l)
	}
	at := DefaultPolicy()
	at.Limits.MaxMemoriesPerOwner = MaxMemoriesPerOwnerLimit
	if err := at.Validate(); err != nil {
		t.Fatalf("a policy at the largest owner size: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.mutate(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseServiceConfigJSON(t *testing.T) {
	good := ServiceConfig{Schema: "engram_a", Embedding: EmbeddingConfig{Provider: ProviderBuiltin, Dimensions: 384}, Policy: DefaultPolicy()}
	b, _ := json.Marshal(good)
	if _, err := ParseServiceConfigJSON(b); err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{
		"unknown field": strings.Replace(string(b), `"schema"`, `"schemaa":"x","schema"`, 1),
		"no schema":     strings.Replace(string(b), `"schema":"engram_a"`, `"schema":""`, 1),
		"bad provider":  strings.Replace(string(b), `"builtin"`, `"magic"`, 1),
		"not json":      "{",
	} {
		if _, err := ParseServiceConfigJSON([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLLMTimeout: llm.timeout is a Go duration within 1s..5m, 10s when
// absent (modelapi's TestLLMAttemptTimeout: one attempt may take all of it).
func TestLLMTimeout(t *testing.T) {
	base := ServiceConfig{Schema: "engram_a", Embedding: EmbeddingConfig{Provider: ProviderBuiltin, Dimensions: 384}, Policy: DefaultPolicy()}
	for timeout, want := range map[string]time.Duration{"": 10 * time.Second, "1s": time.Second, "90s": 90 * time.Second, "5m": 5 * time.Minute} {
		c := base
		c.LLM = &LLMConfig{Endpoint: "http://llm/v1", Model: "m", Timeout: timeout}
		if err := c.Validate(); err != nil {
			t.Fatalf("timeout %q refused: %v", timeout, err)
		}
		if got, _ := c.LLM.TimeoutDuration(); got != want {
			t.Errorf("timeout %q = %s, want %s", timeout, got, want)
		}
	}
	for _, bad := range []string{"10", "500ms", "6m", "-5s", "soon"} {
		c := base
		c.LLM = &LLMConfig{Endpoint: "http://llm/v1", Model: "m", Timeout: bad}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "llm.timeout") {
			t.Errorf("timeout %q: %v, want an llm.timeout error", bad, err)
		}
	}
}
