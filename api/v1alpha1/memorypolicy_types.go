package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Duration is a span of time written as a whole number and one unit:
// s, m, h, d (days) or w (weeks), for example "30d" or "12h". "0" means never.
// +kubebuilder:validation:MaxLength=8
// +kubebuilder:validation:XValidation:rule="self.matches('^(0|[1-9][0-9]{0,5}(s|m|h|d|w))$')",message="must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never"
type Duration string

// ArbitrationMode says who decides about memories in the arbitration band.
// +kubebuilder:validation:Enum=LLM;None
type ArbitrationMode string

const (
	// ArbitrationLLM asks the runtime's LLM (if it has one) to ADD, UPDATE, DELETE or NOOP.
	ArbitrationLLM ArbitrationMode = "LLM"
	// ArbitrationNone inserts a new memory without asking.
	ArbitrationNone ArbitrationMode = "None"
)

// InjectionGuardMode says what happens to content that looks like a prompt injection.
// +kubebuilder:validation:Enum=Reject;Flag;Off
type InjectionGuardMode string

const (
	// InjectionReject refuses the write with a validation error.
	InjectionReject InjectionGuardMode = "Reject"
	// InjectionFlag stores the memory with an "injection" flag; context rendering leaves it out.
	InjectionFlag InjectionGuardMode = "Flag"
	// InjectionOff turns the guard off.
	InjectionOff InjectionGuardMode = "Off"
)

// MemoryPolicySpec is how memory behaves for the runtimes that reference it.
// +kubebuilder:validation:XValidation:rule="!has(self.search) || !has(self.limits) || !has(self.search.defaultTopK) || !has(self.limits.maxTopK) || self.search.defaultTopK <= self.limits.maxTopK",message="search.defaultTopK must not exceed limits.maxTopK"
type MemoryPolicySpec struct {
	// Categories of memory. Without it the default set applies: identity (kept
	// forever, pinned), preference (90d), project (60d), contextual (30d).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Categories []CategorySpec `json:"categories,omitempty"`

	// Dedup configures the two-threshold deduplication of writes.
	// +optional
	// +kubebuilder:default={}
	Dedup DedupSpec `json:"dedup"`

	// Limits bound what one owner and one request may use.
	// +optional
	// +kubebuilder:default={}
	Limits LimitsSpec `json:"limits"`

	// Search configures the hybrid ranking.
	// +optional
	// +kubebuilder:default={}
	Search SearchSpec `json:"search"`

	// Forgetting configures the decay job.
	// +optional
	// +kubebuilder:default={}
	Forgetting ForgettingSpec `json:"forgetting"`

	// Retention configures the purge job.
	// +optional
	// +kubebuilder:default={}
	Retention RetentionSpec `json:"retention"`

	// Redaction configures secret redaction and the prompt-injection guard.
	// +optional
	// +kubebuilder:default={}
	Redaction RedactionSpec `json:"redaction"`

	// Conversation configures conversation memory: context windows, the
	// summary DAG, idle sessions and append limits.
	// +optional
	// +kubebuilder:default={}
	Conversation ConversationSpec `json:"conversation"`

	// Reranking is an optional second stage of vector and hybrid search:
	// a /rerank server (text-embeddings-inference, Jina, Cohere) orders
	// the first stage's top candidates. Absent = no reranking.
	// +optional
	Reranking *RerankingSpec `json:"reranking,omitempty"`
}

// CategorySpec is one category of memory. Unset fields are resolved by the
// operator (never written back): ttl "0" (never), halfLife ttl/2, priority 50.
// +kubebuilder:validation:XValidation:rule="!(has(self.global) && self.global && has(self.protected) && self.protected)",message="a global category cannot also be protected: global categories already accept writes only from source user or system, and protected would shut out the system"
type CategorySpec struct {
	// Name of the category, as clients send it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_-]*$`
	Name string `json:"name"`

	// TTL after which a memory of this category expires, e.g. "90d"; "0" = never.
	// +optional
	TTL Duration `json:"ttl,omitempty"`

	// HalfLife of the decay score; default ttl/2 (no decay when ttl is "0").
	// +optional
	HalfLife Duration `json:"halfLife,omitempty"`

	// Priority orders categories when context is rendered (higher first).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Priority *int32 `json:"priority,omitempty"`

	// Pinned memories are always injected into context, before the others.
	// +optional
	Pinned bool `json:"pinned,omitempty"`

	// Protected memories can be added, changed or deleted only by writes whose
	// source is "user"; agents can read them but not rewrite them. Use it for
	// hard user constraints.
	// +optional
	Protected bool `json:"protected,omitempty"`

	// Description tells the extraction model what belongs in this category
	// (it is part of the extraction prompt).
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Description string `json:"description,omitempty"`

	// Global categories hold tenant-wide knowledge: memories stored under a
	// reserved owner, written only with source user or system, included in
	// every owner's search and context, and left alone when an owner is erased.
	// +optional
	Global bool `json:"global,omitempty"`
}

// DedupSpec configures deduplication: at or above autoMergeThreshold a write
// updates its nearest neighbour in place; between arbitrationThreshold and
// autoMergeThreshold the arbiter decides; below, a new memory is inserted.
// +kubebuilder:validation:XValidation:rule="!has(self.arbitrationThreshold) || !has(self.autoMergeThreshold) || (self.arbitrationThreshold > 0.0 && self.arbitrationThreshold <= self.autoMergeThreshold && self.autoMergeThreshold <= 1.0)",message="thresholds must satisfy 0 < arbitrationThreshold <= autoMergeThreshold <= 1"
type DedupSpec struct {
	// AutoMergeThreshold is the cosine similarity at or above which a write merges.
	// +optional
	// +kubebuilder:default=0.95
	AutoMergeThreshold float64 `json:"autoMergeThreshold,omitempty"`

	// ArbitrationThreshold is the lower bound of the arbitration band.
	// +optional
	// +kubebuilder:default=0.85
	ArbitrationThreshold float64 `json:"arbitrationThreshold,omitempty"`

	// Arbitration is LLM (ask the runtime's LLM, if any) or None (insert).
	// +optional
	// +kubebuilder:default=LLM
	Arbitration ArbitrationMode `json:"arbitration,omitempty"`
}

// LimitsSpec bounds what one owner and one request may use.
type LimitsSpec struct {
	// MaxMemoriesPerOwner caps the rows one owner keeps; over it the inactive
	// rows go first, then the active rows of lowest value. At most 2000:
	// every search, context and add reads all of an owner's rows, so an
	// owner costs in proportion to its size (docs/performance.md, "Owner size").
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2000
	MaxMemoriesPerOwner int32 `json:"maxMemoriesPerOwner,omitempty"`

	// MaxContentBytes is the largest memory content accepted, in bytes.
	// +optional
	// +kubebuilder:default=500
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=65536
	MaxContentBytes int32 `json:"maxContentBytes,omitempty"`

	// MaxQueryBytes is the largest search query accepted, in bytes.
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=65536
	MaxQueryBytes int32 `json:"maxQueryBytes,omitempty"`

	// MaxTopK is the most results one search may ask for.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxTopK int32 `json:"maxTopK,omitempty"`

	// MaxFactsPerExtraction is the most facts one extraction call may store.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxFactsPerExtraction int32 `json:"maxFactsPerExtraction,omitempty"`

	// MaxSessionsPerOwner is the most conversation sessions one owner may
	// keep; creating one more is refused (409 quota-exceeded) until
	// sessions are deleted. 10,000 is years of daily conversations.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 1000000",message="limits.maxSessionsPerOwner must be within 1..1000000"
	MaxSessionsPerOwner int32 `json:"maxSessionsPerOwner,omitempty"`

	// MaxEpisodesPerOwner is the most episodes one owner may keep; ending a
	// session that would write one more is refused (409 quota-exceeded)
	// and writes nothing. At most 10000: episode search and context score
	// all of an owner's episodes, like memories.
	// +optional
	// +kubebuilder:default=2000
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000",message="limits.maxEpisodesPerOwner must be within 1..10000: episode search and context read all of an owner's episodes"
	MaxEpisodesPerOwner int32 `json:"maxEpisodesPerOwner,omitempty"`

	// MaxDocumentVersions is how many versions of each profile and
	// constraints document are kept: a write prunes older ones (except
	// versions a session's snapshot still renders).
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000",message="limits.maxDocumentVersions must be within 1..10000"
	MaxDocumentVersions int32 `json:"maxDocumentVersions,omitempty"`

	// MaxDocumentsPerOwner is the most profile and constraints documents
	// one owner may keep (one of each per agent id: agent ids are chosen by
	// clients); writing the document of one more agent id is refused (409
	// quota-exceeded) and writes nothing.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000",message="limits.maxDocumentsPerOwner must be within 1..10000"
	MaxDocumentsPerOwner int32 `json:"maxDocumentsPerOwner,omitempty"`

	// MaxHistoryPerMemory is how many of a memory's newest history rows are
	// kept besides the row that created it: an update or a merge prunes
	// older ones in its transaction.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000",message="limits.maxHistoryPerMemory must be within 1..10000"
	MaxHistoryPerMemory int32 `json:"maxHistoryPerMemory,omitempty"`
}

// SearchSpec configures hybrid ranking: score = vector*similarity +
// text*text rank + decay*decay score.
// +kubebuilder:validation:XValidation:rule="!has(self.vectorWeight) || !has(self.textWeight) || !has(self.decayWeight) || self.vectorWeight + self.textWeight + self.decayWeight > 0.0",message="at least one of search.vectorWeight, textWeight, decayWeight must be above 0"
type SearchSpec struct {
	// VectorWeight of cosine similarity, 0..1.
	// +optional
	// +kubebuilder:default=0.6
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	VectorWeight *float64 `json:"vectorWeight,omitempty"`

	// TextWeight of the full-text rank, 0..1.
	// +optional
	// +kubebuilder:default=0.2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	TextWeight *float64 `json:"textWeight,omitempty"`

	// DecayWeight of the decay score, 0..1.
	// +optional
	// +kubebuilder:default=0.2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	DecayWeight *float64 `json:"decayWeight,omitempty"`

	// DefaultTopK is the number of results when a search does not say.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	DefaultTopK int32 `json:"defaultTopK,omitempty"`

	// TextSearchConfig is the PostgreSQL text search configuration of
	// full-text search (the text part of hybrid search, text search, history
	// and episode search): a language, whose words are stemmed and whose stop
	// words are dropped, or "simple" (words lower-cased, kept whole, no stop
	// words) for tenants whose memories mix languages or scripts. Changing it
	// rebuilds the tenant's text index concurrently; searches use the
	// previous configuration until the new index is built
	// (docs/memory-model.md, "Text search language").
	// +optional
	// +kubebuilder:default=english
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self in ['simple', 'arabic', 'armenian', 'basque', 'catalan', 'danish', 'dutch', 'english', 'finnish', 'french', 'german', 'greek', 'hindi', 'hungarian', 'indonesian', 'irish', 'italian', 'lithuanian', 'nepali', 'norwegian', 'portuguese', 'romanian', 'russian', 'serbian', 'spanish', 'swedish', 'tamil', 'turkish', 'yiddish']",message="search.textSearchConfig must be one of the text search configurations PostgreSQL 17 ships: simple, arabic, armenian, basque, catalan, danish, dutch, english, finnish, french, german, greek, hindi, hungarian, indonesian, irish, italian, lithuanian, nepali, norwegian, portuguese, romanian, russian, serbian, spanish, swedish, tamil, turkish, yiddish"
	TextSearchConfig string `json:"textSearchConfig,omitempty"`
}

// ForgettingSpec configures the decay job.
type ForgettingSpec struct {
	// MinDecayScore: active memories whose decay score falls below it are
	// forgotten (soft-deleted) by the decay job. 0 turns forgetting off.
	// +optional
	// +kubebuilder:default=0.05
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	MinDecayScore *float64 `json:"minDecayScore,omitempty"`
}

// RetentionSpec configures the purge job.
type RetentionSpec struct {
	// PurgeInactiveAfter: soft-deleted memories are hard-deleted (with their
	// history) this long after they became inactive. "0" purges at the next run.
	// +optional
	// +kubebuilder:default="30d"
	PurgeInactiveAfter Duration `json:"purgeInactiveAfter,omitempty"`
}

// RedactionSpec configures secret redaction and the prompt-injection guard.
type RedactionSpec struct {
	// BuiltinPatterns turns the built-in secret patterns on (cloud keys, tokens,
	// JWTs, private keys, passwords in assignments and URLs).
	// +optional
	// +kubebuilder:default=true
	BuiltinPatterns *bool `json:"builtinPatterns,omitempty"`

	// Patterns are extra RE2 regular expressions whose matches are redacted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:MinLength=1
	Patterns []string `json:"patterns,omitempty"`

	// InjectionGuard is Reject (refuse the write), Flag (store, flag, keep out
	// of context) or Off.
	// +optional
	// +kubebuilder:default=Reject
	InjectionGuard InjectionGuardMode `json:"injectionGuard,omitempty"`
}

// MemoryPolicyStatus is the observed state of a MemoryPolicy.
type MemoryPolicyStatus struct {
	// Conditions: Valid, Stalled (while invalid).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the last generation the operator fully acted on (a reconcile that ended without error; the Reconciling condition says whether something still waits).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// BoundRuntimes counts the MemoryRuntimes that reference this policy.
	// +optional
	BoundRuntimes int32 `json:"boundRuntimes"`
}

// MemoryPolicy says how memory behaves: categories with time to live and
// decay, deduplication, limits, ranking, forgetting, retention, redaction
// and conversations.
// MemoryRuntimes in the same namespace reference it by name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mpol,categories=engram
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Bound",type=integer,JSONPath=`.status.boundRuntimes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemoryPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	// +kubebuilder:default={}
	Spec   MemoryPolicySpec   `json:"spec"`
	Status MemoryPolicyStatus `json:"status,omitempty"`
}

// MemoryPolicyList is a list of MemoryPolicy.
//
// +kubebuilder:object:root=true
type MemoryPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemoryPolicy `json:"items"`
}
