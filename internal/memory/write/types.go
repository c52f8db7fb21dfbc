package write

import (
	"encoding/json"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Memory is one stored fact about an owner (an end user).
type Memory struct {
	ID      string `json:"id"`
	Owner   string `json:"owner"`
	Agent   string `json:"agent,omitempty"`
	Session string `json:"session,omitempty"`
	// SourceSession is the conversation session the memory was extracted
	// from (provenance): extracted facts belong to the owner (Session
	// empty) unless the policy's conversation.extractionScope is session.
	SourceSession  string      `json:"sourceSession,omitempty"`
	Source         core.Source `json:"source"`
	Category       string      `json:"category"`
	Content        string      `json:"content"`
	Importance     int         `json:"importance"`
	Flags          []string    `json:"flags,omitempty"`
	Active         bool        `json:"active"`
	SupersededBy   string      `json:"supersededBy,omitempty"`
	ExpiresAt      *time.Time  `json:"expiresAt,omitempty"`
	CreatedAt      time.Time   `json:"createdAt"`
	UpdatedAt      time.Time   `json:"updatedAt"`
	LastAccessedAt *time.Time  `json:"lastAccessedAt,omitempty"`
	AccessCount    int64       `json:"accessCount"`
	// Metadata is the client's JSON object about the memory (nil: none);
	// Tags its set of labels (nil: none). Both are data, never shown to
	// another owner.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
	// Withheld: the injection guard flagged the memory and the caller is
	// agent-facing (an agent token, or MCP), so its content is left out
	// (empty); everything else is as stored. Set by the API only.
	Withheld bool `json:"withheld,omitempty"`
}

// AddRequest is one write.
type AddRequest struct {
	Owner   string `json:"owner"`
	Agent   string `json:"agent,omitempty"`
	Session string `json:"session,omitempty"`
	// Source of the write; empty means agent.
	Source  core.Source `json:"source,omitempty"`
	Content string      `json:"content"`
	// Category; empty means the policy's default category (see Policy.DefaultCategory).
	Category string `json:"category,omitempty"`
	// Importance 1..10; 0 means 5.
	Importance int `json:"importance,omitempty"`
	// TTL overrides the category's ttl for this memory ("7d"; "0" = never).
	TTL string `json:"ttl,omitempty"`
	// Embedding is the client's own vector of Content (the runtime's
	// dimensions, finite, not all zeros): when set, the embedder is not
	// called for this write, and dedup compares this vector.
	Embedding []float32 `json:"embedding,omitempty"`
	// Metadata (a JSON object) and Tags (a set of strings) of the memory,
	// within the limits of core/labels.go. A write that merges into an
	// existing memory replaces its metadata (tags) when it has any.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
	// OwnerOnly: the write may reach this owner only, never the tenant-wide
	// (global) memories every owner's prompt shows — set for a credential
	// bound to one owner and for facts extracted from a conversation. A
	// global category is then refused (core.ErrProtected). Never from JSON.
	OwnerOnly bool `json:"-"`
	// SourceSession is the conversation session a fact was extracted from
	// (provenance, kept whatever the scope); set by ExtractSession only,
	// never from JSON.
	SourceSession string `json:"-"`
}

// Action is what Add did.
type Action string

// Actions of AddResult.
const (
	// ActionAdded: a new memory was inserted.
	ActionAdded Action = "added"
	// ActionMerged: the nearest Neighbour (similarity >= autoMerge) was updated in place.
	ActionMerged Action = "merged"
	// ActionReactivated: like merged, and the Neighbour was inactive before.
	ActionReactivated Action = "reactivated"
	// ActionUpdated: the arbiter merged the write into its Neighbour (LLM UPDATE).
	ActionUpdated Action = "updated"
	// ActionReplaced: the arbiter superseded the Neighbour with a new memory (LLM DELETE).
	ActionReplaced Action = "replaced"
	// ActionNoop: nothing changed (LLM NOOP, or the Neighbour is protected).
	ActionNoop Action = "noop"
)

// AddResult says what one write did.
type AddResult struct {
	Action Action `json:"action"`
	// Memory is the memory the write ended in (new, merged or kept).
	Memory Memory `json:"memory"`
	// Similarity to the nearest existing memory of the owner (0 when none).
	Similarity float64 `json:"similarity"`
	// AffectedIDs are other memories the write changed (the superseded one of "replaced").
	AffectedIDs []string `json:"affectedIds,omitempty"`
	// Redactions lists the kinds of secrets removed from the content.
	Redactions []string `json:"redactions,omitempty"`
	// Arbiter says how the arbitration band was decided: "llm", "none"
	// (no LLM or arbitration None), or "fallback: <reason>".
	Arbiter string `json:"arbiter,omitempty"`
	// Evicted is the number of the owner's memories deleted to stay under the cap.
	Evicted int `json:"evicted,omitempty"`

	ownerRows int // the owner's rows right after an insert
}

// OwnerRows is the owner's row count right after the write inserted a row
// (0 otherwise): eviction checks the cap against it without a round trip.
func (r AddResult) OwnerRows() int { return r.ownerRows }
