package memory

import "time"

// Long-term memory from conversations (issue 16): facts extracted from a
// session's messages, episodes of finished sessions, versioned profile and
// constraints documents per (owner, agent) with a changelog and per-session
// snapshots, and tenant-wide (global) knowledge.

// GlobalOwner is the reserved owner id of tenant-wide memories (categories
// with global: true). Owner ids must start with a letter or digit, so no
// request can name it: only the engine reads and writes under it.
const GlobalOwner = "_global"

// Conflict types an extracted fact may carry: how it relates to what the
// store may already hold about the user.
const (
	// ConflictFactualCorrection: the fact corrects an earlier, wrong one.
	ConflictFactualCorrection = "factual_correction"
	// ConflictPreferenceChange: the user's preference changed.
	ConflictPreferenceChange = "preference_change"
	// ConflictContextDependent: both may be true in different contexts.
	ConflictContextDependent = "context_dependent"
)

// Batch-dedup decisions about one candidate fact.
const (
	DecisionAdd    = "add"
	DecisionUpdate = "update"
	DecisionDelete = "delete"
	DecisionNoop   = "noop"
)

// SessionExtractRequest extracts facts from a session's messages since its
// extraction watermark.
type SessionExtractRequest struct {
	Owner     string `json:"owner"`
	SessionID string `json:"sessionId"`
	// Source the memories are written with at most: agent (default), job,
	// system or user. The run lowers it to the least trusted source of the
	// messages it reads (SessionExtractResult.EffectiveSource).
	Source Source `json:"source,omitempty"`
}

// ExtractedFact is one candidate fact of a session extraction and what
// became of it.
type ExtractedFact struct {
	Content    string `json:"content"`
	Category   string `json:"category"`
	Importance int    `json:"importance"`
	// ExpiresAt is the expiry the model gave (optional).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// ConflictType: factual_correction, preference_change or context_dependent ("" = none).
	ConflictType string `json:"conflictType,omitempty"`
	// Decision of the batch dedup: add, update, delete or noop; empty (and
	// absent from JSON) when the fact was dropped.
	Decision string `json:"decision,omitempty"`
	// TargetID is the existing memory an update, delete or noop refers to.
	TargetID string `json:"targetId,omitempty"`
	// Result of the write (nil when the fact was dropped).
	Result *AddResult `json:"result,omitempty"`
	// Dropped says why the fact was not stored ("" when it was).
	Dropped string `json:"dropped,omitempty"`
	// Flags of the fact's text: "injection" when the injection guard
	// flagged it (mode Flag).
	Flags []string `json:"flags,omitempty"`
	// Withheld: the fact's text is flagged and the caller is agent-facing
	// (an agent token, or MCP), so Content is left out. Set by the API only.
	Withheld bool `json:"withheld,omitempty"`
}

// SessionExtractResult says what one session extraction did.
type SessionExtractResult struct {
	SessionID string `json:"sessionId"`
	// FromSeq..ToSeq (inclusive) are the messages read; both 0 when there were none.
	FromSeq int64 `json:"fromSeq"`
	ToSeq   int64 `json:"toSeq"`
	// Watermark is the session's extraction watermark after the run (the
	// highest seq extracted).
	Watermark int64 `json:"watermark"`
	// LLMCalls made by this run (0, 1 or 2).
	LLMCalls int             `json:"llmCalls"`
	Facts    []ExtractedFact `json:"facts"`
	// Truncated: the cleaned conversation exceeded 8,000 characters and its
	// oldest part was left out of the prompt.
	Truncated bool `json:"truncated"`
	// EffectiveSource is the source the facts were written with: the least
	// trusted of the requested source and the sources of the messages read
	// (FromSeq..ToSeq). Lower than the request when an agent appended some
	// of them: protected categories are then refused, as for any agent write.
	EffectiveSource Source `json:"effectiveSource"`
}

// EndSessionRequest ends a session: it is archived, facts are extracted
// when the policy's conversation.extractOnEnd is on and an LLM exists, and
// an episode is written when it has at least 3 user turns.
type EndSessionRequest struct {
	Owner     string `json:"owner"`
	SessionID string `json:"sessionId"`
	// Source the extracted memories are written with at most (see
	// SessionExtractRequest.Source): agent (default), job, system or user.
	Source Source `json:"source,omitempty"`
}

// EndSessionResult says what EndSession did.
type EndSessionResult struct {
	Session Session `json:"session"`
	// EndedAt is when the session was ended (the first EndSession's time).
	EndedAt time.Time `json:"endedAt"`
	// Extraction is the extraction run (nil when none ran; see ExtractionSkipped).
	Extraction *SessionExtractResult `json:"extraction,omitempty"`
	// ExtractionSkipped says why no extraction ran: "policy" (extractOnEnd
	// off), "no-llm", or "" when it ran.
	ExtractionSkipped string `json:"extractionSkipped,omitempty"`
	// Episode written or already existing (nil: fewer than 3 user turns).
	Episode *Episode `json:"episode,omitempty"`
}

// MinEpisodeUserTurns is the number of user messages a session needs for an episode.
const MinEpisodeUserTurns = 3

// Episode is the summary of one finished (ended or idle) session.
type Episode struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent,omitempty"`
	Summary   string `json:"summary"`
	// Method: llm or extractive.
	Method    string `json:"method"`
	UserTurns int    `json:"userTurns"`
	// StartedAt and EndedAt are the times of the session's first and last message.
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt"`
	CreatedAt time.Time `json:"createdAt"`
}

// EpisodeSearchRequest ranks an owner's episodes.
type EpisodeSearchRequest struct {
	Owner string `json:"owner"`
	// Agent narrows to one agent's episodes (optional).
	Agent string `json:"agent,omitempty"`
	// Query: when empty, episodes come newest first.
	Query string `json:"query,omitempty"`
	// Limit: 0 means 10; at most 50.
	Limit int `json:"limit,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// EpisodeSearchResult is the answer of SearchEpisodes.
type EpisodeSearchResult struct {
	// Results, best first.
	Results []EpisodeHit `json:"results"`
	// Truncated: the byte cap left the Omitted lowest-ranked results out.
	Truncated bool `json:"truncated"`
	Omitted   int  `json:"omitted,omitempty"`
}

// EpisodeHit is one episode with its scores. Score = search.vectorWeight ×
// vector + search.textWeight × text + search.decayWeight × recency, where
// recency halves every 30 days since the episode ended.
type EpisodeHit struct {
	Episode      Episode `json:"episode"`
	Score        float64 `json:"score"`
	VectorScore  float64 `json:"vectorScore"`
	TextScore    float64 `json:"textScore"`
	RecencyScore float64 `json:"recencyScore"`
}

// DocumentKind names one of the two versioned documents of an (owner, agent).
type DocumentKind string

// Document kinds.
const (
	// DocProfile: what the agent knows about the user, as text; any source may write it.
	DocProfile DocumentKind = "profile"
	// DocConstraints: the user's rules for the agent, as text; only source user may write it.
	DocConstraints DocumentKind = "constraints"
)

// MaxDocumentBytes bounds a profile or constraints document (after redaction).
const MaxDocumentBytes = 8 << 10

// Document is the profile or constraints of an owner for one agent ("" =
// every agent). Content is plain text (Markdown is fine), rendered verbatim
// (sanitized line by line) into context.
type Document struct {
	Owner string       `json:"owner"`
	Agent string       `json:"agent,omitempty"`
	Kind  DocumentKind `json:"kind"`
	// Version counts the writes: 0 = never written (empty content), then 1, 2, ...
	Version   int64     `json:"version"`
	Content   string    `json:"content"`
	Source    Source    `json:"source,omitempty"`
	UpdatedAt time.Time `json:"updatedAt,omitempty"`
}

// GetDocumentRequest reads a document, now or at a past version.
type GetDocumentRequest struct {
	Owner string       `json:"owner"`
	Agent string       `json:"agent,omitempty"`
	Kind  DocumentKind `json:"kind"`
	// Version: 0 = the current one.
	Version int64 `json:"version,omitempty"`
}

// PutDocumentRequest replaces a document's content, making a new version.
type PutDocumentRequest struct {
	Owner   string       `json:"owner"`
	Agent   string       `json:"agent,omitempty"`
	Kind    DocumentKind `json:"kind"`
	Content string       `json:"content"`
	// Source of the write: user, agent (default) or system. Constraints accept only user.
	Source Source `json:"source,omitempty"`
	// IfVersion, when not nil, makes the write conditional: ErrConflict
	// unless the current version equals it (0 = not written yet).
	IfVersion *int64 `json:"ifVersion,omitempty"`
}

// ChangelogRequest reads the changes of an owner's documents, newest first.
type ChangelogRequest struct {
	Owner string `json:"owner"`
	// Agent narrows to one agent's documents; nil lists every agent's.
	Agent *string `json:"agent,omitempty"`
	// Scope: profile, constraints, or "" for both.
	Scope DocumentKind `json:"scope,omitempty"`
	// Limit: 0 means 50; at most 500.
	Limit int `json:"limit,omitempty"`
	// Cursor from a previous page's NextCursor.
	Cursor string `json:"cursor,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// ChangelogPage is one page of the changelog, newest first: at most its
// limit and the byte cap.
type ChangelogPage struct {
	Items []ChangelogEntry `json:"items"`
	PageBounds
}

// ChangelogEntry is one write of a document.
type ChangelogEntry struct {
	ID      int64        `json:"id"`
	Owner   string       `json:"owner"`
	Agent   string       `json:"agent,omitempty"`
	Kind    DocumentKind `json:"kind"`
	Version int64        `json:"version"`
	Source  Source       `json:"source"`
	// ActorID is the writer's credential identity ("" for jobs).
	ActorID string    `json:"actorId"`
	Before  string    `json:"before"`
	After   string    `json:"after"`
	At      time.Time `json:"at"`
}

// SessionSnapshot is the profile and constraints versions a session's
// context renders: pinned when the session is created, moved to the
// current versions only by AdvanceSnapshot.
type SessionSnapshot struct {
	Owner              string `json:"owner"`
	SessionID          string `json:"sessionId"`
	Agent              string `json:"agent,omitempty"`
	ProfileVersion     int64  `json:"profileVersion"`
	ConstraintsVersion int64  `json:"constraintsVersion"`
}
