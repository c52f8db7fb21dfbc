package controller

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
)

const day = memory.Duration(24 * time.Hour)

// crdDefaults is a MemoryPolicySpec as the API server stores an empty one:
// every field with a CRD default filled in.
func crdDefaults() memoryv1alpha1.MemoryPolicySpec {
	return memoryv1alpha1.MemoryPolicySpec{
		Dedup: memoryv1alpha1.DedupSpec{AutoMergeThreshold: 0.95, ArbitrationThreshold: 0.85, Arbitration: memoryv1alpha1.ArbitrationLLM},
		Limits: memoryv1alpha1.LimitsSpec{MaxMemoriesPerOwner: 1000, MaxContentBytes: 500, MaxQueryBytes: 1000, MaxTopK: 100, MaxFactsPerExtraction: 5, MaxSessionsPerOwner: 10000, MaxEpisodesPerOwner: 2000, MaxDocumentVersions: 100,
			MaxDocumentsPerOwner: 100, MaxHistoryPerMemory: 100},
		Search:     memoryv1alpha1.SearchSpec{VectorWeight: ptr.To(0.6), TextWeight: ptr.To(0.2), DecayWeight: ptr.To(0.2), DefaultTopK: 10, TextSearchConfig: "english"},
		Forgetting: memoryv1alpha1.ForgettingSpec{MinDecayScore: ptr.To(0.05)},
		Retention:  memoryv1alpha1.RetentionSpec{PurgeInactiveAfter: "30d"},
		Redaction:  memoryv1alpha1.RedactionSpec{BuiltinPatterns: ptr.To(true), InjectionGuard: memoryv1alpha1.InjectionReject},
		Conversation: memoryv1alpha1.ConversationSpec{
			Window:         memoryv1alpha1.ConversationWindowSpec{Strategy: memoryv1alpha1.WindowSummary, Budget: 4000, BufferSize: 20, FreshTail: 5},
			Compaction:     memoryv1alpha1.ConversationCompactionSpec{Threshold: 0.75, ChunkSize: 20, CondenseGroupSize: 4, MaxDepth: 4},
			SessionIdleTTL: "0",
			ArchiveAfter:   "0",
			Limits: memoryv1alpha1.ConversationLimitsSpec{MaxMessagesPerTurn: 50, MaxMessageBytes: 32768,
				MaxTurnMessages: 500, MaxTurnTokens: 200000, MaxMessagesPerSession: 100000},
			ExtractionScope: memoryv1alpha1.ExtractionScopeOwner,
		},
	}
}

func TestResolvePolicyDefaults(t *testing.T) {
	want := memory.DefaultPolicy()
	defaulted := crdDefaults()
	for name, spec := range map[string]*memoryv1alpha1.MemoryPolicySpec{
		"no policy":                    nil,
		"empty spec (no API server)":   {},
		"empty spec with CRD defaults": &defaulted,
	} {
		got, err := ResolvePolicy(spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: resolved to\n%+v\nwant the built-in defaults\n%+v", name, got, want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s: the default policy is invalid: %v", name, err)
		}
	}
}

func TestResolvePolicyCategories(t *testing.T) {
	spec := crdDefaults()
	spec.Categories = []memoryv1alpha1.CategorySpec{
		{Name: "identity", Pinned: true, Protected: true, Priority: ptr.To[int32](100)},
		{Name: "preference", TTL: "90d"},
		{Name: "task", TTL: "7d", HalfLife: "1d", Priority: ptr.To[int32](0)},
		{Name: "blip", TTL: "1s"},
	}
	got, err := ResolvePolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []memory.Category{
		{Name: "identity", TTL: 0, HalfLife: 0, Priority: 100, Pinned: true, Protected: true},
		{Name: "preference", TTL: 90 * day, HalfLife: 45 * day, Priority: 50},
		{Name: "task", TTL: 7 * day, HalfLife: day, Priority: 0},
		{Name: "blip", TTL: memory.Duration(time.Second), HalfLife: memory.Duration(time.Second), Priority: 50},
	}
	if !reflect.DeepEqual(got.Categories, want) {
		t.Errorf("categories =\n%+v\nwant\n%+v", got.Categories, want)
	}
	if spec.Categories[1].HalfLife != "" || spec.Categories[1].Priority != nil {
		t.Error("ResolvePolicy wrote defaults back into the spec's list items")
	}
}

func TestResolvePolicyPassesValuesThrough(t *testing.T) {
	spec := crdDefaults()
	spec.Dedup = memoryv1alpha1.DedupSpec{AutoMergeThreshold: 0.9, ArbitrationThreshold: 0.8, Arbitration: memoryv1alpha1.ArbitrationNone}
	spec.Search.TextWeight = ptr.To(0.0) // an explicit 0 stays 0
	spec.Forgetting.MinDecayScore = ptr.To(0.0)
	spec.Retention.PurgeInactiveAfter = "0"
	spec.Redaction = memoryv1alpha1.RedactionSpec{BuiltinPatterns: ptr.To(false), Patterns: []string{`ticket-[0-9]+`}, InjectionGuard: memoryv1alpha1.InjectionFlag}
	got, err := ResolvePolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dedup != (memory.Dedup{AutoMergeThreshold: 0.9, ArbitrationThreshold: 0.8, Arbitration: "None"}) {
		t.Errorf("dedup = %+v", got.Dedup)
	}
	if got.Search.TextWeight != 0 || got.Search.VectorWeight != 0.6 {
		t.Errorf("search = %+v", got.Search)
	}
	if got.Forgetting.MinDecayScore != 0 || got.Retention.PurgeInactiveAfter != 0 {
		t.Errorf("forgetting/retention = %+v / %+v", got.Forgetting, got.Retention)
	}
	if got.Redaction.BuiltinPatterns || got.Redaction.InjectionGuard != "Flag" || len(got.Redaction.Patterns) != 1 {
		t.Errorf("redaction = %+v", got.Redaction)
	}
}

func TestResolvePolicyConversation(t *testing.T) {
	spec := crdDefaults()
	spec.Conversation = memoryv1alpha1.ConversationSpec{
		Window:         memoryv1alpha1.ConversationWindowSpec{Strategy: memoryv1alpha1.WindowToken, Budget: 8000, BufferSize: 40, FreshTail: 8},
		Compaction:     memoryv1alpha1.ConversationCompactionSpec{Threshold: 0.5, ChunkSize: 10, CondenseGroupSize: 3, MaxDepth: 2},
		SessionIdleTTL: "90d",
		ArchiveAfter:   "2w",
		Limits: memoryv1alpha1.ConversationLimitsSpec{MaxMessagesPerTurn: 10, MaxMessageBytes: 1024,
			MaxTurnMessages: 40, MaxTurnTokens: 5000, MaxMessagesPerSession: 300},
	}
	got, err := ResolvePolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	want := memory.ConversationPolicy{
		Window:         memory.ConversationWindow{Strategy: memory.WindowToken, Budget: 8000, BufferSize: 40, FreshTail: 8},
		Compaction:     memory.ConversationCompaction{Threshold: 0.5, ChunkSize: 10, CondenseGroupSize: 3, MaxDepth: 2},
		SessionIdleTTL: memory.Duration(90 * 24 * time.Hour),
		ArchiveAfter:   memory.Duration(14 * 24 * time.Hour),
		Limits: memory.ConversationLimits{MaxMessagesPerTurn: 10, MaxMessageBytes: 1024,
			MaxTurnMessages: 40, MaxTurnTokens: 5000, MaxMessagesPerSession: 300},
		// Left out of the spec: the default.
		ExtractionScope: memory.ExtractionScopeOwner,
	}
	if got.Conversation != want {
		t.Errorf("conversation = %+v, want %+v", got.Conversation, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("valid conversation policy refused: %v", err)
	}
	// Partly set: the rest keeps the defaults.
	partial := crdDefaults()
	partial.Conversation = memoryv1alpha1.ConversationSpec{Compaction: memoryv1alpha1.ConversationCompactionSpec{ChunkSize: 7}}
	got, err = ResolvePolicy(&partial)
	wantPartial := memory.DefaultConversationPolicy()
	wantPartial.Compaction.ChunkSize = 7
	if err != nil || got.Conversation != wantPartial {
		t.Errorf("partial conversation = %+v, %v; want %+v", got.Conversation, err, wantPartial)
	}
}

// TestResolvePolicyCarriesQuotas: the per-owner quotas reach the engine's
// policy; unset ones take the engine's defaults.
func TestResolvePolicyCarriesQuotas(t *testing.T) {
	spec := crdDefaults()
	spec.Limits.MaxSessionsPerOwner, spec.Limits.MaxEpisodesPerOwner, spec.Limits.MaxDocumentVersions = 7, 8, 9
	spec.Limits.MaxDocumentsPerOwner, spec.Limits.MaxHistoryPerMemory = 10, 11
	got, err := ResolvePolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Limits; l.MaxSessionsPerOwner != 7 || l.MaxEpisodesPerOwner != 8 || l.MaxDocumentVersions != 9 ||
		l.MaxDocumentsPerOwner != 10 || l.MaxHistoryPerMemory != 11 {
		t.Errorf("limits = %+v, want the quotas 7, 8, 9, 10, 11", l)
	}
	got, err = ResolvePolicy(&memoryv1alpha1.MemoryPolicySpec{})
	if l := got.Limits; err != nil || l.MaxSessionsPerOwner != memory.DefaultMaxSessionsPerOwner ||
		l.MaxEpisodesPerOwner != memory.DefaultMaxEpisodesPerOwner || l.MaxDocumentVersions != memory.DefaultMaxDocumentVersions ||
		l.MaxDocumentsPerOwner != memory.DefaultMaxDocumentsPerOwner || l.MaxHistoryPerMemory != memory.DefaultMaxHistoryPerMemory {
		t.Errorf("unset quotas = %+v, %v; want the defaults", l, err)
	}
}

// TestResolvePolicySemanticErrors: what CEL lets through, Validate catches.
func TestResolvePolicySemanticErrors(t *testing.T) {
	cases := map[string]func(*memoryv1alpha1.MemoryPolicySpec){
		"redaction.patterns[0]": func(s *memoryv1alpha1.MemoryPolicySpec) { s.Redaction.Patterns = []string{"(unclosed"} },
		"matches the empty string": func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Redaction.Patterns = []string{"x*"}
		},
		"conversation.limits.maxTurnMessages": func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Conversation.Limits.MaxMessagesPerTurn, s.Conversation.Limits.MaxTurnMessages = 100, 99
		},
		"conversation.archiveAfter": func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Conversation.SessionIdleTTL, s.Conversation.ArchiveAfter = "1d", "24h"
		},
		"more than ten times the ttl": func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", TTL: "1d", HalfLife: "30d"}}
		},
	}
	for want, mutate := range cases {
		spec := crdDefaults()
		mutate(&spec)
		p, err := ResolvePolicy(&spec)
		if err == nil {
			err = p.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want one mentioning %q", err, want)
		}
	}
}

func TestResolvePolicyLongTermFields(t *testing.T) {
	spec := crdDefaults()
	spec.Categories = []memoryv1alpha1.CategorySpec{
		{Name: "identity", Description: "who the user is"},
		{Name: "company", Global: true, Description: "tenant-wide facts"},
	}
	spec.Conversation.ExtractOnEnd = true
	spec.Conversation.ExtractionScope = memoryv1alpha1.ExtractionScopeSession
	got, err := ResolvePolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := got.Category("company")
	if !c.Global || c.Description != "tenant-wide facts" || got.Categories[0].Description != "who the user is" || !got.Conversation.ExtractOnEnd ||
		got.Conversation.ExtractionScope != memory.ExtractionScopeSession {
		t.Fatalf("resolved %+v, conversation %+v", got.Categories, got.Conversation)
	}
	spec.Categories[1].Protected = true
	p, err := ResolvePolicy(&spec)
	if err == nil {
		err = p.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "cannot also be protected") {
		t.Fatalf("global and protected: err = %v", err)
	}
}
