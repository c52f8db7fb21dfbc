// Package conversation is conversation memory: sessions, their message
// log, context windows, the summary DAG and its compaction, the message
// history search. Store holds it over the engine's shared state
// (core.State); the façade internal/memory holds one Store, delegates its
// conversation methods to it and re-exports the types
// (facade_conversation*.go, docs/architecture.md). It imports
// internal/memory/core and the engine's leaves, never the façade nor
// long-term memory (DocumentVersions is the one thing it needs of that).
package conversation

import (
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

// Conversation memory: sessions (conversations of one owner), their
// append-only message log, context windows built from it, and a lossless
// summary DAG that replaces old turns in windows without losing them.
// "Session" in these types is a conversation session, not a database
// session (see memory.SessionSettings for those).

// Role of a message.
type Role string

// Roles of a message.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleTool      Role = "tool"
)

// Session is a conversation of one owner.
type Session struct {
	ID           string    `json:"id"`
	Owner        string    `json:"owner"`
	Agent        string    `json:"agent,omitempty"`
	Title        string    `json:"title,omitempty"`
	Archived     bool      `json:"archived"`
	CreatedAt    time.Time `json:"createdAt"`
	LastActiveAt time.Time `json:"lastActiveAt"`
	// MessageCount and TokenCount count every message of the session.
	MessageCount int64 `json:"messageCount"`
	TokenCount   int64 `json:"tokenCount"`
	// SummarizedThrough is the highest seq covered by a leaf summary (0 = none).
	SummarizedThrough int64 `json:"summarizedThrough"`
	// UnsummarizedTokens counts the tokens of the messages after SummarizedThrough.
	UnsummarizedTokens int64 `json:"unsummarizedTokens"`
	SummaryCount       int64 `json:"summaryCount"`
}

// CreateSessionRequest creates a session.
type CreateSessionRequest struct {
	Owner string `json:"owner"`
	// ID is optional (letters, digits and . _ : @ + -); a UUID is generated when empty.
	ID    string `json:"id,omitempty"`
	Agent string `json:"agent,omitempty"`
	Title string `json:"title,omitempty"`
}

// ListSessionsRequest pages through an owner's sessions, most recently active first.
type ListSessionsRequest struct {
	Owner string `json:"owner"`
	Agent string `json:"agent,omitempty"`
	// Archived filters on the archived flag; nil lists both.
	Archived *bool `json:"archived,omitempty"`
	// Limit: 0 means 50; at most 500.
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// SessionPage is one page of ListSessions: at most its limit and the byte cap.
type SessionPage struct {
	Sessions []Session `json:"sessions"`
	core.PageBounds
}

// UpdateSessionRequest changes a session's metadata; nil fields stay as they are.
type UpdateSessionRequest struct {
	Owner    string  `json:"owner"`
	ID       string  `json:"id"`
	Title    *string `json:"title,omitempty"`
	Archived *bool   `json:"archived,omitempty"`
}

// TurnMessage is one message given to AppendTurn.
type TurnMessage struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
	// ToolName is the tool an assistant message calls or a tool message answers (optional).
	ToolName string `json:"toolName,omitempty"`
	// ToolCallID links a tool result to the assistant's call; required for role tool.
	ToolCallID string `json:"toolCallId,omitempty"`
}

// Message is one stored message of a session (memory.ConversationMessage).
type Message struct {
	// Seq numbers the session's messages 1, 2, 3, ... without gaps.
	Seq        int64     `json:"seq"`
	Role       Role      `json:"role"`
	Content    string    `json:"content"`
	ToolName   string    `json:"toolName,omitempty"`
	ToolCallID string    `json:"toolCallId,omitempty"`
	Tokens     int       `json:"tokens"`
	CreatedAt  time.Time `json:"createdAt"`
	// Flags lists what the injection guard noticed (mode Flag).
	Flags []string `json:"flags,omitempty"`
	// Source is who appended the message (the turn's source, capped by the
	// credential), not what it says it is (Role): an agent relaying the
	// user's words appends role user with source agent. Messages stored
	// before the column existed read agent (migration 11).
	Source core.Source `json:"source"`
}

// AppendRequest appends one turn (1..limits.maxMessagesPerTurn messages) atomically.
type AppendRequest struct {
	Owner     string `json:"owner"`
	SessionID string `json:"sessionId"`
	// Source of every message of the turn (empty means agent); stored per
	// message and caps what an extraction from them may write.
	Source   core.Source   `json:"source,omitempty"`
	Messages []TurnMessage `json:"messages"`
	// MaxBytes lowers the runtime's byte cap for the answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// AppendResult is the stored turn and the session after it.
type AppendResult struct {
	Session Session `json:"session"`
	// Messages are the stored messages, oldest first, as many as the byte
	// cap holds (the whole turn is stored either way).
	Messages []Message `json:"messages"`
	// CompactionDue: the unsummarized tokens now exceed
	// compactionThreshold × the default window budget.
	CompactionDue bool `json:"compactionDue"`
	// Redactions lists the kinds of secrets removed from the messages.
	Redactions []string `json:"redactions,omitempty"`
	// Truncation: the byte cap left the newest stored messages out of the
	// answer; the seq range names them for the message list.
	Truncation
}

// MessagesRequest reads messages of a session: a seq range [From, To), or
// the last N.
type MessagesRequest struct {
	Owner     string `json:"owner"`
	SessionID string `json:"sessionId"`
	// From and To bound the range [From, To); 0 leaves that side open.
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
	// Last > 0 returns the last N messages instead (with From/To ignored).
	Last int `json:"last,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// Truncation says what a bounded answer left out. A window, a message list
// and an expansion never exceed their budget by more than one message, nor
// the runtime's byte cap: what the rules would have given beyond that is
// left out, and the answer names it so a client can read it with the
// message list (GET .../messages?from=OmittedFrom&to=OmittedTo).
type Truncation struct {
	// Truncated: the answer holds less than its rules asked for.
	Truncated bool `json:"truncated"`
	// Omitted counts the messages left out.
	Omitted int `json:"omitted,omitempty"`
	// OmittedFrom and OmittedTo are the seq range [from, to) of the
	// messages left out (seq is gap-free, so Omitted = to - from).
	OmittedFrom int64 `json:"omittedFrom,omitempty"`
	OmittedTo   int64 `json:"omittedTo,omitempty"`
}

// Omit records that the messages [from, to) were left out (nothing when
// the range is empty).
func (t *Truncation) Omit(from, to int64) {
	if to <= from {
		return
	}
	*t = Truncation{Truncated: true, Omitted: int(to - from), OmittedFrom: from, OmittedTo: to}
}

// MessagePage is the answer of Messages: the messages read, in seq order.
type MessagePage struct {
	Items []Message `json:"items"`
	// Truncation: the range asked for held more than one answer may (1,000
	// messages or the byte cap).
	Truncation
}

// WindowRequest asks for a context window; zero fields take the policy's defaults.
type WindowRequest struct {
	Owner     string                `json:"owner"`
	SessionID string                `json:"sessionId"`
	Strategy  policy.WindowStrategy `json:"strategy,omitempty"`
	// Budget in tokens (CountTokens).
	Budget int `json:"budget,omitempty"`
	// FreshTail is how many of the newest messages are always kept
	// verbatim, extended back to the user or system message that starts
	// their turn (so the tail holds whole turns).
	FreshTail int `json:"freshTail,omitempty"`
	// Last is N of the buffer strategy.
	Last int `json:"last,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// Kinds of a WindowItem and a HistoryHit.
const (
	KindMessage = "message"
	KindSummary = "summary"
)

// WindowItem is a message or a summary of a window.
type WindowItem struct {
	Kind    string   `json:"kind"`
	Message *Message `json:"message,omitempty"`
	Summary *Summary `json:"summary,omitempty"`
}

// Window is a context window, in chronological order.
type Window struct {
	Strategy policy.WindowStrategy `json:"strategy"`
	Budget   int                   `json:"budget"`
	// Tokens is the sum of the items' tokens.
	Tokens int          `json:"tokens"`
	Items  []WindowItem `json:"items"`
	// FreshTailOverBudget: the fresh tail alone exceeded the budget, so it
	// was cut to its newest messages that fit (Truncation says which were
	// left out).
	FreshTailOverBudget bool `json:"freshTailOverBudget"`
	// Dropped counts the messages left out (covered by summaries or out of budget).
	Dropped int `json:"dropped"`
	// Truncation: the fresh tail was cut to fit the budget, or the byte cap
	// left out the oldest items the rules chose.
	Truncation
}

// Summary methods.
const (
	MethodLLM           = "llm"
	MethodLLMAggressive = "llm-aggressive"
	MethodExtractive    = "extractive"
)

// Summary is a node of a session's summary DAG.
type Summary struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	SessionID string `json:"sessionId"`
	// Depth 0 is a leaf (covers messages); 1.. are condensed (cover summaries).
	Depth      int    `json:"depth"`
	Content    string `json:"content"`
	ExpandHint string `json:"expandHint,omitempty"`
	// EarliestSeq..LatestSeq (inclusive) are the messages the summary covers.
	EarliestSeq     int64     `json:"earliestSeq"`
	LatestSeq       int64     `json:"latestSeq"`
	EarliestAt      time.Time `json:"earliestAt"`
	LatestAt        time.Time `json:"latestAt"`
	Tokens          int       `json:"tokens"`
	DescendantCount int       `json:"descendantCount"`
	// Method: llm, llm-aggressive or extractive.
	Method    string    `json:"method"`
	CreatedAt time.Time `json:"createdAt"`
}

// SummaryDescription is a summary with its place in the DAG.
type SummaryDescription struct {
	Summary Summary `json:"summary"`
	// Children are the summaries a condensed summary covers, in order.
	Children []Summary `json:"children,omitempty"`
	// MessageRange is [from, to) of the messages a leaf covers.
	MessageRange *[2]int64 `json:"messageRange,omitempty"`
	// ParentID is the summary that condensed this one ("" = a root).
	ParentID string `json:"parentId,omitempty"`
	// ChildrenTruncated: the answer's byte cap, or the most children a
	// compaction gives one summary, left ChildrenOmitted children out
	// (the newest; at least that many).
	ChildrenTruncated bool `json:"childrenTruncated,omitempty"`
	ChildrenOmitted   int  `json:"childrenOmitted,omitempty"`
}

// ExpandRequest asks for the original messages under a summary.
type ExpandRequest struct {
	Owner string `json:"owner"`
	ID    string `json:"id"`
	// MaxTokens caps the messages' tokens: 0 means DefaultExpandTokens.
	MaxTokens int `json:"maxTokens,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// Expansion is the original messages under a summary.
type Expansion struct {
	Summary  Summary   `json:"summary"`
	Messages []Message `json:"messages"`
	Tokens   int       `json:"tokens"`
	// Truncation: the messages did not fit maxTokens or the byte cap; those
	// given are the oldest, the newest are left out.
	Truncation
}

// CompactMode selects how CompactSession works.
type CompactMode string

// Compaction modes.
const (
	// CompactIncremental summarizes only new chunks, then condenses full groups.
	CompactIncremental CompactMode = "incremental"
	// CompactFull also condenses every level until nothing more can be (a fixed point).
	CompactFull CompactMode = "full"
)

// CompactSessionRequest compacts one session.
type CompactSessionRequest struct {
	Owner     string      `json:"owner"`
	SessionID string      `json:"sessionId"`
	Mode      CompactMode `json:"mode,omitempty"`
	// Force ignores the threshold (compacts whatever is outside the fresh tail).
	Force bool `json:"force,omitempty"`
	// MaxBytes lowers the runtime's byte cap for the answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// CompactSessionResult says what one compaction did.
type CompactSessionResult struct {
	LeavesCreated      int `json:"leavesCreated"`
	CondensedCreated   int `json:"condensedCreated"`
	MessagesSummarized int `json:"messagesSummarized"`
	// Roots are the summaries no other summary covers, in order: the
	// oldest, as many as the byte cap holds.
	Roots []Summary `json:"roots"`
	// RootsTruncated: the byte cap left the RootsOmitted newest roots out
	// (a window or a history search reads them).
	RootsTruncated bool `json:"rootsTruncated,omitempty"`
	RootsOmitted   int  `json:"rootsOmitted,omitempty"`
	// Method of the summaries created (the weakest used: extractive when any fell back).
	Method string `json:"method,omitempty"`
}

// HistorySearchRequest searches an owner's messages and summaries.
type HistorySearchRequest struct {
	Owner string `json:"owner"`
	Query string `json:"query"`
	// SessionID narrows the search to one session (optional).
	SessionID string `json:"sessionId,omitempty"`
	// Limit: default and max 20.
	Limit int `json:"limit,omitempty"`
	// MaxBytes lowers the runtime's byte cap for this answer (0 = the cap).
	MaxBytes int `json:"-"`
}

// HistorySearchResult is the answer of SearchHistory.
type HistorySearchResult struct {
	// Results, best first.
	Results []HistoryHit `json:"results"`
	// Truncated: the byte cap left the Omitted lowest-ranked results out.
	Truncated bool `json:"truncated"`
	Omitted   int  `json:"omitted,omitempty"`
}

// HistoryHit is one message or summary found.
type HistoryHit struct {
	Kind      string `json:"kind"`
	SessionID string `json:"sessionId"`
	// Seq of a message hit.
	Seq int64 `json:"seq,omitempty"`
	// SummaryID of a summary hit.
	SummaryID string `json:"summaryId,omitempty"`
	// Source of a message hit: who appended it.
	Source core.Source `json:"source,omitempty"`
	// Snippet is at most 500 characters.
	Snippet   string    `json:"snippet"`
	Score     float64   `json:"score"`
	CreatedAt time.Time `json:"createdAt"`
}

// Weaker records the weakest summary method a compaction used.
func (r *CompactSessionResult) Weaker(method string) {
	rank := map[string]int{"": 0, MethodLLM: 1, MethodLLMAggressive: 2, MethodExtractive: 3}
	if rank[method] > rank[r.Method] {
		r.Method = method
	}
}
