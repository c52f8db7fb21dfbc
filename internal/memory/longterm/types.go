// Package longterm is long-term memory from conversations: the versioned
// profile and constraints documents of an (owner, agent) with their
// changelog and the snapshots sessions pin, the episodes of finished
// sessions, fact extraction (from given messages, and from a session's
// new messages up to its watermark, with one batch dedup) and EndSession.
// Store holds it over the engine's shared state (core.State), the write
// path (write.Store: every extracted fact is written through it, the
// session's watermark in the same transaction) and conversation memory
// (whose reads and summarizer episodes use); the façade internal/memory
// holds one Store, delegates to it and re-exports the types
// (facade_longterm.go, facade_extract.go, docs/architecture.md). Global
// memories and the context rendering stay in the façade for now: they
// read memories through its read path. It imports internal/memory/core,
// internal/memory/write, internal/memory/conversation and the engine's
// leaves, never the façade.
package longterm

import (
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

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
const MaxDocumentBytes = core.MaxDocumentBytes

// Document is the profile or constraints of an owner for one agent ("" =
// every agent). Content is plain text (Markdown is fine), rendered verbatim
// (sanitized line by line) into context.
type Document struct {
	Owner string       `json:"owner"`
	Agent string       `json:"agent,omitempty"`
	Kind  DocumentKind `json:"kind"`
	// Version counts the writes: 0 = never written (empty content), then 1, 2, ...
	Version   int64       `json:"version"`
	Content   string      `json:"content"`
	Source    core.Source `json:"source,omitempty"`
	UpdatedAt time.Time   `json:"updatedAt,omitempty"`
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
	Source core.Source `json:"source,omitempty"`
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
	core.PageBounds
}

// ChangelogEntry is one write of a document.
type ChangelogEntry struct {
	ID      int64        `json:"id"`
	Owner   string       `json:"owner"`
	Agent   string       `json:"agent,omitempty"`
	Kind    DocumentKind `json:"kind"`
	Version int64        `json:"version"`
	Source  core.Source  `json:"source"`
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
