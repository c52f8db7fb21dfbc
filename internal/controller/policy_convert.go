package controller

import (
	"fmt"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
)

// Defaults of category fields a MemoryPolicy leaves unset. They are resolved
// here, never written back into the object's list items (GitOps tools would
// show a permanent diff).
const (
	defaultCategoryPriority = 50
)

// ResolvePolicy converts a MemoryPolicy spec into a memory.Policy with every
// field set: the one place where the CRD's shape meets the engine's. A nil
// spec is the built-in default policy. Fields the API server normally
// defaults are defaulted here too (to the same values), so a spec that did
// not pass through the API server resolves the same way.
func ResolvePolicy(spec *memoryv1alpha1.MemoryPolicySpec) (memory.Policy, error) {
	p := memory.DefaultPolicy()
	if spec == nil {
		return p, nil
	}
	if len(spec.Categories) > 0 {
		cats, err := resolveCategories(spec.Categories)
		if err != nil {
			return memory.Policy{}, err
		}
		p.Categories = cats
	}

	d := spec.Dedup
	p.Dedup.AutoMergeThreshold = orFloat(d.AutoMergeThreshold, p.Dedup.AutoMergeThreshold)
	p.Dedup.ArbitrationThreshold = orFloat(d.ArbitrationThreshold, p.Dedup.ArbitrationThreshold)
	if d.Arbitration != "" {
		p.Dedup.Arbitration = string(d.Arbitration)
	}

	l := spec.Limits
	p.Limits.MaxMemoriesPerOwner = orInt(l.MaxMemoriesPerOwner, p.Limits.MaxMemoriesPerOwner)
	p.Limits.MaxContentBytes = orInt(l.MaxContentBytes, p.Limits.MaxContentBytes)
	p.Limits.MaxQueryBytes = orInt(l.MaxQueryBytes, p.Limits.MaxQueryBytes)
	p.Limits.MaxTopK = orInt(l.MaxTopK, p.Limits.MaxTopK)
	p.Limits.MaxFactsPerExtraction = orInt(l.MaxFactsPerExtraction, p.Limits.MaxFactsPerExtraction)
	p.Limits.MaxSessionsPerOwner = orInt(l.MaxSessionsPerOwner, p.Limits.MaxSessionsPerOwner)
	p.Limits.MaxEpisodesPerOwner = orInt(l.MaxEpisodesPerOwner, p.Limits.MaxEpisodesPerOwner)
	p.Limits.MaxDocumentVersions = orInt(l.MaxDocumentVersions, p.Limits.MaxDocumentVersions)
	p.Limits.MaxDocumentsPerOwner = orInt(l.MaxDocumentsPerOwner, p.Limits.MaxDocumentsPerOwner)
	p.Limits.MaxHistoryPerMemory = orInt(l.MaxHistoryPerMemory, p.Limits.MaxHistoryPerMemory)

	s := spec.Search
	p.Search.VectorWeight = derefFloat(s.VectorWeight, p.Search.VectorWeight)
	p.Search.TextWeight = derefFloat(s.TextWeight, p.Search.TextWeight)
	p.Search.DecayWeight = derefFloat(s.DecayWeight, p.Search.DecayWeight)
	p.Search.DefaultTopK = orInt(s.DefaultTopK, p.Search.DefaultTopK)
	if s.TextSearchConfig != "" {
		p.Search.TextSearchConfig = s.TextSearchConfig
	}

	p.Forgetting.MinDecayScore = derefFloat(spec.Forgetting.MinDecayScore, p.Forgetting.MinDecayScore)

	if v := spec.Retention.PurgeInactiveAfter; v != "" {
		dur, err := memory.ParseDuration(string(v))
		if err != nil {
			return memory.Policy{}, fmt.Errorf("retention.purgeInactiveAfter: %w", err)
		}
		p.Retention.PurgeInactiveAfter = dur
	}

	r := spec.Redaction
	if r.BuiltinPatterns != nil {
		p.Redaction.BuiltinPatterns = *r.BuiltinPatterns
	}
	if len(r.Patterns) > 0 {
		p.Redaction.Patterns = append([]string(nil), r.Patterns...)
	}
	if r.InjectionGuard != "" {
		p.Redaction.InjectionGuard = string(r.InjectionGuard)
	}
	conv, err := resolveConversation(spec.Conversation, p.Conversation)
	if err != nil {
		return memory.Policy{}, err
	}
	p.Conversation = conv
	p.Reranking = resolveReranking(spec.Reranking)
	return p, nil
}

// resolveReranking converts spec.reranking (nil: no reranking); the API
// key reference stays out: the key reaches the pods as an environment
// variable, never through the config.
func resolveReranking(in *memoryv1alpha1.RerankingSpec) *memory.Reranking {
	if in == nil {
		return nil
	}
	r := &memory.Reranking{Endpoint: in.Endpoint, Model: in.Model, API: in.API, TopN: int(in.TopN), Timeout: in.Timeout}
	if r.TopN == 0 {
		r.TopN = memory.DefaultRerankTopN
	}
	if r.Timeout == "" {
		r.Timeout = memory.DefaultRerankTimeout.String()
	}
	return r
}

// resolveConversation fills the conversation policy from spec.conversation;
// unset fields keep the defaults in c (the CRD's defaults are the same).
func resolveConversation(in memoryv1alpha1.ConversationSpec, c memory.ConversationPolicy) (memory.ConversationPolicy, error) {
	if in.Window.Strategy != "" {
		c.Window.Strategy = memory.WindowStrategy(in.Window.Strategy)
	}
	c.Window.Budget = orInt(in.Window.Budget, c.Window.Budget)
	c.Window.BufferSize = orInt(in.Window.BufferSize, c.Window.BufferSize)
	c.Window.FreshTail = orInt(in.Window.FreshTail, c.Window.FreshTail)
	c.Compaction.Threshold = orFloat(in.Compaction.Threshold, c.Compaction.Threshold)
	c.Compaction.ChunkSize = orInt(in.Compaction.ChunkSize, c.Compaction.ChunkSize)
	c.Compaction.CondenseGroupSize = orInt(in.Compaction.CondenseGroupSize, c.Compaction.CondenseGroupSize)
	c.Compaction.MaxDepth = orInt(in.Compaction.MaxDepth, c.Compaction.MaxDepth)
	c.Limits.MaxMessagesPerTurn = orInt(in.Limits.MaxMessagesPerTurn, c.Limits.MaxMessagesPerTurn)
	c.Limits.MaxMessageBytes = orInt(in.Limits.MaxMessageBytes, c.Limits.MaxMessageBytes)
	c.Limits.MaxTurnMessages = orInt(in.Limits.MaxTurnMessages, c.Limits.MaxTurnMessages)
	c.Limits.MaxTurnTokens = orInt(in.Limits.MaxTurnTokens, c.Limits.MaxTurnTokens)
	c.Limits.MaxMessagesPerSession = orInt(in.Limits.MaxMessagesPerSession, c.Limits.MaxMessagesPerSession)
	c.ExtractOnEnd = in.ExtractOnEnd
	if in.ExtractionScope != "" {
		c.ExtractionScope = memory.ExtractionScope(in.ExtractionScope)
	}
	for _, d := range []struct {
		field string
		in    memoryv1alpha1.Duration
		out   *memory.Duration
	}{{"conversation.sessionIdleTTL", in.SessionIdleTTL, &c.SessionIdleTTL}, {"conversation.archiveAfter", in.ArchiveAfter, &c.ArchiveAfter}} {
		if d.in == "" {
			continue
		}
		v, err := memory.ParseDuration(string(d.in))
		if err != nil {
			return c, fmt.Errorf("%s: %w", d.field, err)
		}
		*d.out = v
	}
	return c, nil
}

// resolveCategories fills the unset fields of each category: ttl "0"
// (never), halfLife ttl/2 (no decay when the ttl is 0), priority 50.
func resolveCategories(in []memoryv1alpha1.CategorySpec) ([]memory.Category, error) {
	out := make([]memory.Category, 0, len(in))
	for i, c := range in {
		cat := memory.Category{Name: c.Name, Priority: defaultCategoryPriority, Pinned: c.Pinned, Protected: c.Protected,
			Description: c.Description, Global: c.Global}
		if c.Priority != nil {
			cat.Priority = int(*c.Priority)
		}
		if c.TTL != "" {
			ttl, err := memory.ParseDuration(string(c.TTL))
			if err != nil {
				return nil, fmt.Errorf("categories[%d].ttl: %w", i, err)
			}
			cat.TTL = ttl
		}
		if c.HalfLife != "" {
			hl, err := memory.ParseDuration(string(c.HalfLife))
			if err != nil {
				return nil, fmt.Errorf("categories[%d].halfLife: %w", i, err)
			}
			cat.HalfLife = hl
		} else {
			cat.HalfLife = halfOf(cat.TTL)
		}
		out = append(out, cat)
	}
	return out, nil
}

// halfOf is ttl/2 in whole seconds (the config file's smallest unit), at
// least one second for a non-zero ttl.
func halfOf(ttl memory.Duration) memory.Duration {
	if ttl == 0 {
		return 0
	}
	half := (time.Duration(ttl) / 2).Truncate(time.Second)
	return memory.Duration(max(half, time.Second))
}

func orFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

func orInt(v int32, def int) int {
	if v == 0 {
		return def
	}
	return int(v)
}

func derefFloat(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}
