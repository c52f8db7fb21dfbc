package longterm

import (
	"time"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
)

// The types of fact extraction (Extract: from given messages), session
// extraction (ExtractSession: from a session's new messages) and
// EndSession. Every fact is written through the write path
// (internal/memory/write), like any add.

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
	Source core.Source `json:"source,omitempty"`
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
	Result *write.AddResult `json:"result,omitempty"`
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
	EffectiveSource core.Source `json:"effectiveSource"`
}

// EndSessionRequest ends a session: it is archived, facts are extracted
// when the policy's conversation.extractOnEnd is on and an LLM exists, and
// an episode is written when it has at least 3 user turns.
type EndSessionRequest struct {
	Owner     string `json:"owner"`
	SessionID string `json:"sessionId"`
	// Source the extracted memories are written with at most (see
	// SessionExtractRequest.Source): agent (default), job, system or user.
	Source core.Source `json:"source,omitempty"`
}

// EndSessionResult says what EndSession did.
type EndSessionResult struct {
	Session conversation.Session `json:"session"`
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

// Message is one turn of a conversation given to Extract.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ExtractRequest asks the LLM to pull durable facts out of a conversation
// and adds each one (with dedup).
type ExtractRequest struct {
	Owner    string      `json:"owner"`
	Agent    string      `json:"agent,omitempty"`
	Session  string      `json:"session,omitempty"`
	Source   core.Source `json:"source,omitempty"`
	Messages []Message   `json:"messages"`
}
