package memory

import (
	"encoding/json"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// SearchMode selects the ranking of Search.
type SearchMode string

// Search modes.
const (
	SearchVector SearchMode = "vector"
	SearchHybrid SearchMode = "hybrid"
	SearchText   SearchMode = "text"
)

// SearchRequest is a query over one owner's active memories.
type SearchRequest struct {
	Owner string `json:"owner"`
	// Agent and Session narrow the scope: memories of that agent (session)
	// plus the owner's memories that belong to no agent (session).
	Agent   string `json:"agent,omitempty"`
	Session string `json:"session,omitempty"`
	Query   string `json:"query"`
	// Vector is the client's own embedding of the query (the runtime's
	// dimensions): the embedder is then not called. Vector and hybrid
	// modes use it; in vector mode Query may then be left out.
	Vector []float32 `json:"vector,omitempty"`
	// Mode: vector, hybrid (default) or text.
	Mode SearchMode `json:"mode,omitempty"`
	// TopK: 0 means the policy's defaultTopK.
	TopK       int      `json:"topK,omitempty"`
	Categories []string `json:"categories,omitempty"`
	// MinScore, when not 0, drops results scoring below it.
	MinScore float64 `json:"minScore,omitempty"`
	// Filter keeps only memories whose metadata and tags match it
	// (filter.go); the result stays the exact top-K of those.
	Filter *Filter `json:"filter,omitempty"`
	// textConfig is the tenant's text search configuration, set by search
	// from the text_search row ("" builds English queries).
	textConfig string
	// ExcludeFlagged leaves out memories the injection guard flagged, for
	// results an agent reads (they are data a model could take as orders).
	ExcludeFlagged bool `json:"-"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the
	// cap; SearchAnswer only).
	MaxBytes int `json:"-"`
	// Rerank: false skips the policy's reranker for this search (nil or
	// true: rerank when the policy has a reranker).
	Rerank *bool `json:"rerank,omitempty"`
}

// SearchResult is the answer of SearchAnswer.
type SearchResult struct {
	// Results, best first.
	Results []SearchHit `json:"results"`
	// Truncated: the byte cap left the Omitted lowest-ranked results out.
	Truncated bool `json:"truncated"`
	Omitted   int  `json:"omitted,omitempty"`
	// Reranked is set when the policy has a reranker: true when the
	// results are in the reranker's order, false (with RerankReason)
	// when they are in the first-stage order.
	Reranked     *bool  `json:"reranked,omitempty"`
	RerankReason string `json:"rerankReason,omitempty"`
}

// SearchHit is one result with its scores.
type SearchHit struct {
	Memory Memory `json:"memory"`
	// Score is what the results are ordered by.
	Score       float64 `json:"score"`
	VectorScore float64 `json:"vectorScore"`
	TextScore   float64 `json:"textScore"`
	DecayScore  float64 `json:"decayScore"`
	// RerankScore is the reranker's relevance score, when it ordered
	// this result (Score stays the first stage's).
	RerankScore *float64 `json:"rerankScore,omitempty"`
}

// ListRequest pages through one owner's memories, newest first.
type ListRequest struct {
	Owner    string `json:"owner"`
	Agent    string `json:"agent,omitempty"`
	Session  string `json:"session,omitempty"`
	Category string `json:"category,omitempty"`
	// IncludeInactive also lists deleted, expired, forgotten and superseded
	// memories (expired ones whether or not the expire job has run).
	IncludeInactive bool `json:"includeInactive,omitempty"`
	// IncludeExpired also lists memories past their expiresAt that the
	// expire job has not deactivated yet; without it (and without
	// IncludeInactive) List shows what search and context can return.
	IncludeExpired bool `json:"includeExpired,omitempty"`
	// Filter keeps only memories whose metadata and tags match it (filter.go).
	Filter *Filter `json:"filter,omitempty"`
	// Limit: 1..maxTopK... 0 means 50; at most 500.
	Limit int `json:"limit,omitempty"`
	// Cursor from a previous page's NextCursor.
	Cursor string `json:"cursor,omitempty"`
	// ExcludeFlagged leaves out memories the injection guard flagged (see SearchRequest).
	ExcludeFlagged bool `json:"-"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// ListPage is one page of List: at most its limit and the byte cap.
type ListPage struct {
	Items []Memory `json:"items"`
	PageBounds
}

// UpdateRequest changes fields of one memory; nil fields stay as they are.
type UpdateRequest struct {
	Owner      string  `json:"owner"`
	ID         string  `json:"id"`
	Source     Source  `json:"source,omitempty"`
	Content    *string `json:"content,omitempty"`
	Category   *string `json:"category,omitempty"`
	Importance *int    `json:"importance,omitempty"`
	TTL        *string `json:"ttl,omitempty"`
	// Embedding is the client's own vector of the new Content (only with
	// Content): the embedder is then not called.
	Embedding []float32 `json:"embedding,omitempty"`
	// Metadata replaces the memory's (nil: unchanged; {} clears it), Tags
	// its tags (nil: unchanged; an empty list clears them).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
}

// HistoryEntry is one mutation of a memory.
type HistoryEntry struct {
	ID       int64  `json:"id"`
	MemoryID string `json:"memoryId"`
	Action   string `json:"action"`
	Actor    Source `json:"actor"`
	// ActorID is the identity of the writer's credential (a token's name or
	// a signed token's subject); "" for jobs and for rows written before
	// identities were recorded.
	ActorID    string         `json:"actorId"`
	OldContent *string        `json:"oldContent,omitempty"`
	NewContent *string        `json:"newContent,omitempty"`
	Details    map[string]any `json:"details,omitempty"`
	At         time.Time      `json:"at"`
	// Withheld: a content of this entry looks like a prompt injection and
	// the caller is agent-facing, so it is left out. Set by the API only.
	Withheld bool `json:"withheld,omitempty"`
}

// HistoryRequest reads one memory's history, oldest first, a page at a time.
type HistoryRequest struct {
	Owner string `json:"owner"`
	ID    string `json:"id"`
	// Limit: 0 means 100; at most 1000.
	Limit int `json:"limit,omitempty"`
	// Cursor from a previous page's NextCursor.
	Cursor string `json:"cursor,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// HistoryPage is one page of a memory's history: at most its limit and
// the byte cap.
type HistoryPage struct {
	Items []HistoryEntry `json:"items"`
	PageBounds
}

// EraseResult counts what EraseOwner deleted.
type EraseResult struct {
	Memories int64 `json:"memories"`
	History  int64 `json:"history"`
	// Sessions, Messages and Summaries of the owner's conversations.
	Sessions  int64 `json:"sessions"`
	Messages  int64 `json:"messages"`
	Summaries int64 `json:"summaries"`
	// Episodes of the owner's sessions; Documents (profiles and
	// constraints, every version) and their Changelog entries.
	Episodes  int64 `json:"episodes"`
	Documents int64 `json:"documents"`
	Changelog int64 `json:"changelog"`
}

// ContextRequest renders an owner's memories for a prompt.
type ContextRequest struct {
	Owner   string `json:"owner"`
	Agent   string `json:"agent,omitempty"`
	Session string `json:"session,omitempty"`
	// Query, when set, orders non-pinned memories by relevance to it.
	Query string `json:"query,omitempty"`
	// MaxTokens is the budget; 0 means 1000.
	MaxTokens int `json:"maxTokens,omitempty"`
	// IncludeEpisodes adds the owner's most relevant episodes (to Query,
	// else the newest) in their own section after the memories.
	IncludeEpisodes bool `json:"includeEpisodes,omitempty"`
	// MaxEpisodes bounds them: 0 means 3; at most 10.
	MaxEpisodes int `json:"maxEpisodes,omitempty"`
	// Filter keeps only the memories whose metadata, tags and timestamps
	// match it (filter.go) among those context picks from; episodes and
	// the profile and constraints documents are not memories it tests.
	Filter *Filter `json:"filter,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// ContextResult is the rendered text and what went into it.
type ContextResult struct {
	Text string `json:"text"`
	// Tokens is the size of Text by CountTokens (about 4 bytes of ASCII a token).
	Tokens int `json:"tokens"`
	// IDs of the memories rendered, in order.
	IDs []string `json:"ids"`
	// Omitted counts the renderable memories left out: those that did not
	// fit the budget and those that were not candidates (contextCandidates).
	Omitted int `json:"omitted"`
	// ProfileVersion and ConstraintsVersion rendered (0 = none); with a
	// Session, the session's snapshot versions.
	ProfileVersion     int64 `json:"profileVersion"`
	ConstraintsVersion int64 `json:"constraintsVersion"`
	// EpisodeIDs rendered (IncludeEpisodes), in order.
	EpisodeIDs []string `json:"episodeIds,omitempty"`
	// Truncated: the byte cap left out text the token budget had room for
	// (the memories among it are counted in Omitted).
	Truncated bool `json:"truncated"`
}

// JobOptions apply to every maintenance operation (core.JobOptions: the
// parts in packages of their own run their operations with them).
type JobOptions = core.JobOptions

// Maintenance operations.
const (
	OpDecay   = "decay"
	OpExpire  = "expire"
	OpPurge   = "purge"
	OpCompact = "compact"
	// OpSummarize compacts conversation sessions over the threshold into summaries.
	OpSummarize = "summarize"
	// OpSessions deletes (and archives) idle conversation sessions.
	OpSessions = "sessions"
)

// Operations lists the maintenance operations in the order a job runs them.
var Operations = []string{OpDecay, OpExpire, OpPurge, OpCompact, OpSummarize, OpSessions}

// OpExport writes an export of the tenant to a RetentionJob's destination.
// It is not a maintenance operation of the engine (Store.RunJob): `manager
// job` streams Store.Export to a file or a bucket.
const OpExport = "export"

// RunOperations lists every operation a RetentionJob run may name, in the
// order it runs them: the maintenance operations, then export (so the
// export holds what they left).
var RunOperations = append(append([]string{}, Operations...), OpExport)

// JobResult counts what one maintenance operation did (core.JobResult).
type JobResult = core.JobResult

// Results of a maintenance run (JobSummary.Result); the same words as the
// RetentionJob's status.lastRun.result.
const (
	RunSucceeded = "Succeeded"
	RunFailed    = "Failed"
	RunSkipped   = "Skipped"
)

// JobSummary is the JSON that `manager job` prints to stdout and writes to
// its termination-message file; the operator copies it into the
// RetentionJob's status.lastRun. Keep it well under 4 KiB (the kubelet's
// termination-message limit).
type JobSummary struct {
	Schema         string         `json:"schema"`
	DryRun         bool           `json:"dryRun"`
	Result         string         `json:"result"`
	StartTime      time.Time      `json:"startTime"`
	CompletionTime time.Time      `json:"completionTime"`
	Operations     []JobSummaryOp `json:"operations"`
	// Message is the error of a failed run or why it was skipped ("skipped: locked").
	Message string `json:"message,omitempty"`
}

// JobSummaryOp is one operation of a JobSummary.
type JobSummaryOp struct {
	Name           string `json:"name"`
	Scanned        int64  `json:"scanned"`
	Affected       int64  `json:"affected"`
	Batches        int    `json:"batches"`
	DurationMillis int64  `json:"durationMillis"`
	// Pending: owners whose compaction continues in the next run.
	Pending int64 `json:"pending,omitempty"`
	// Export: what the export operation wrote.
	Export *JobExport `json:"export,omitempty"`
}

// JobExport is the file or object an export operation wrote: its location
// (s3://bucket/key or pvc://claim/path), size, records of each kind and
// the trailer's checksum.
type JobExport struct {
	Location string           `json:"location"`
	Bytes    int64            `json:"bytes"`
	Records  map[string]int64 `json:"records"`
	SHA256   string           `json:"sha256"`
}
