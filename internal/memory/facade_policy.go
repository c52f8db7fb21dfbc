package memory

import (
	"slices"

	"github.com/engram-dev/engram/internal/memory/policy"
)

// The policy contract lives in internal/memory/policy; these names keep
// the façade's API (the operator, the service config and the tests use
// them).

type (
	Category               = policy.Category
	ConversationCompaction = policy.ConversationCompaction
	ConversationLimits     = policy.ConversationLimits
	ConversationPolicy     = policy.ConversationPolicy
	ConversationWindow     = policy.ConversationWindow
	Dedup                  = policy.Dedup
	Duration               = policy.Duration
	ExtractionScope        = policy.ExtractionScope
	Forgetting             = policy.Forgetting
	Limits                 = policy.Limits
	Policy                 = policy.Policy
	Redaction              = policy.Redaction
	Reranking              = policy.Reranking
	Retention              = policy.Retention
	Search                 = policy.Search
	WindowStrategy         = policy.WindowStrategy
)

const (
	DefaultRerankTopN           = policy.DefaultRerankTopN
	DefaultRerankTimeout        = policy.DefaultRerankTimeout
	ArbitrationLLM              = policy.ArbitrationLLM
	ArbitrationNone             = policy.ArbitrationNone
	DefaultMaxDocumentVersions  = policy.DefaultMaxDocumentVersions
	DefaultMaxDocumentsPerOwner = policy.DefaultMaxDocumentsPerOwner
	DefaultMaxEpisodesPerOwner  = policy.DefaultMaxEpisodesPerOwner
	DefaultMaxHistoryPerMemory  = policy.DefaultMaxHistoryPerMemory
	DefaultMaxSessionsPerOwner  = policy.DefaultMaxSessionsPerOwner
	ExtractionScopeOwner        = policy.ExtractionScopeOwner
	ExtractionScopeSession      = policy.ExtractionScopeSession
	GuardFlag                   = policy.GuardFlag
	GuardOff                    = policy.GuardOff
	GuardReject                 = policy.GuardReject
	MaxBufferSize               = policy.MaxBufferSize
	MaxChunkSize                = policy.MaxChunkSize
	MaxCondenseGroupSize        = policy.MaxCondenseGroupSize
	MaxDocumentVersionsLimit    = policy.MaxDocumentVersionsLimit
	MaxDocumentsPerOwnerLimit   = policy.MaxDocumentsPerOwnerLimit
	MaxDuration                 = policy.MaxDuration
	MaxEpisodesPerOwnerLimit    = policy.MaxEpisodesPerOwnerLimit
	MaxFreshTail                = policy.MaxFreshTail
	MaxHistoryPerMemoryLimit    = policy.MaxHistoryPerMemoryLimit
	MaxMemoriesPerOwnerLimit    = policy.MaxMemoriesPerOwnerLimit
	MaxMessageBytesCap          = policy.MaxMessageBytesCap
	MaxMessagesPerSessionCap    = policy.MaxMessagesPerSessionCap
	MaxMessagesPerTurnCap       = policy.MaxMessagesPerTurnCap
	MaxSessionsPerOwnerLimit    = policy.MaxSessionsPerOwnerLimit
	MaxSummaryDepth             = policy.MaxSummaryDepth
	MaxTurnMessagesCap          = policy.MaxTurnMessagesCap
	MaxTurnTokensCap            = policy.MaxTurnTokensCap
	MaxWindowBudget             = policy.MaxWindowBudget
	MinTurnTokens               = policy.MinTurnTokens
	WindowBuffer                = policy.WindowBuffer
	WindowSummary               = policy.WindowSummary
	WindowToken                 = policy.WindowToken
)

// DefaultCategories is policy.DefaultCategories.
func DefaultCategories() []Category {
	return policy.DefaultCategories()
}

// DefaultConversationPolicy is policy.DefaultConversationPolicy.
func DefaultConversationPolicy() ConversationPolicy {
	return policy.DefaultConversationPolicy()
}

// DefaultPolicy is policy.DefaultPolicy.
func DefaultPolicy() Policy {
	return policy.DefaultPolicy()
}

// ParseDuration is policy.ParseDuration.
func ParseDuration(s string) (Duration, error) {
	return policy.ParseDuration(s)
}

// DefaultTextSearchConfig is policy.DefaultTextSearchConfig.
const DefaultTextSearchConfig = policy.DefaultTextSearchConfig

// TextSearchConfigs are policy.TextSearchConfigs.
func TextSearchConfigs() []string { return slices.Clone(policy.TextSearchConfigs) }
