package policy

import (
	"errors"
	"fmt"
)

// ConversationPolicy is the conversation part of a Policy (MemoryPolicy
// spec.conversation). A zero field takes its default (DefaultConversationPolicy),
// so a config written before conversations existed stays valid.
type ConversationPolicy struct {
	Window     ConversationWindow     `json:"window"`
	Compaction ConversationCompaction `json:"compaction"`
	// SessionIdleTTL: the sessions job deletes sessions (with their messages
	// and summaries) idle for longer; 0 = never.
	SessionIdleTTL Duration `json:"sessionIdleTTL"`
	// ArchiveAfter: the sessions job archives sessions idle for longer; 0 = never.
	ArchiveAfter Duration           `json:"archiveAfter"`
	Limits       ConversationLimits `json:"limits"`
	// ExtractOnEnd: EndSession extracts facts from the session (when the
	// runtime has an LLM).
	ExtractOnEnd bool `json:"extractOnEnd,omitempty"`
	// ExtractionScope: the scope of facts extracted from a session, owner
	// (the default: visible from every session of the owner) or session
	// (only from the session they came from). Either way a fact records
	// its session as sourceSession.
	ExtractionScope ExtractionScope `json:"extractionScope,omitempty"`
}

// ExtractionScope is the scope of facts extracted from a session.
type ExtractionScope string

// Extraction scopes.
const (
	ExtractionScopeOwner   ExtractionScope = "owner"
	ExtractionScopeSession ExtractionScope = "session"
)

// ConversationWindow holds the defaults of a window request.
type ConversationWindow struct {
	// Strategy: buffer, token or summary.
	Strategy WindowStrategy `json:"strategy,omitempty"`
	// Budget in tokens.
	Budget int `json:"budget,omitempty"`
	// BufferSize is N of the buffer strategy.
	BufferSize int `json:"bufferSize,omitempty"`
	// FreshTail is how many of the newest messages every window keeps verbatim.
	FreshTail int `json:"freshTail,omitempty"`
}

// ConversationCompaction configures the summary DAG.
type ConversationCompaction struct {
	// Threshold (0 < x <= 1): compaction is due when a session's unsummarized
	// tokens exceed Threshold × Window.Budget.
	Threshold float64 `json:"threshold,omitempty"`
	// ChunkSize is the number of messages a leaf summary covers.
	ChunkSize int `json:"chunkSize,omitempty"`
	// CondenseGroupSize (>= 2) is the number of summaries a condensed summary covers.
	CondenseGroupSize int `json:"condenseGroupSize,omitempty"`
	// MaxDepth (1..8) is the deepest level of condensed summaries.
	MaxDepth int `json:"maxDepth,omitempty"`
}

// ConversationLimits bound one append, one turn and one session.
type ConversationLimits struct {
	// MaxMessagesPerTurn bounds one append (the name predates turns that
	// span appends; MaxTurnMessages bounds the turn).
	MaxMessagesPerTurn int `json:"maxMessagesPerTurn,omitempty"`
	// MaxMessageBytes bounds one message's content as stored (after redaction).
	MaxMessageBytes int `json:"maxMessageBytes,omitempty"`
	// MaxTurnMessages and MaxTurnTokens bound one turn (a user or system
	// message and what follows it) across all the appends that build it.
	MaxTurnMessages int `json:"maxTurnMessages,omitempty"`
	MaxTurnTokens   int `json:"maxTurnTokens,omitempty"`
	// MaxMessagesPerSession bounds the messages one session keeps.
	MaxMessagesPerSession int `json:"maxMessagesPerSession,omitempty"`
}

// Bounds of the conversation policy (the CRD's are the same).
const (
	MaxWindowBudget       = 1_000_000
	MaxBufferSize         = 1000
	MaxFreshTail          = 100
	MaxChunkSize          = 500
	MaxCondenseGroupSize  = 64
	MaxSummaryDepth       = 8
	MaxMessagesPerTurnCap = 500
	MaxMessageBytesCap    = 1 << 20
	// MaxTurnMessagesCap is the largest limits.maxTurnMessages: far above
	// the longest agent loops, and a window's fresh tail reads a turn whole.
	MaxTurnMessagesCap = 10_000
	// MaxTurnTokensCap is the largest window budget: a longer turn could
	// never be shown whole in any window.
	MaxTurnTokensCap = MaxWindowBudget
	// MinTurnTokens: below it, a few ordinary messages would end a turn.
	MinTurnTokens = 1000
	// MaxMessagesPerSessionCap bounds what the policy may allow one session.
	MaxMessagesPerSessionCap = 1_000_000
)

// DefaultConversationPolicy is the conversation policy of a MemoryPolicy that
// says nothing about conversations; the CRD's defaults are the same.
func DefaultConversationPolicy() ConversationPolicy {
	return ConversationPolicy{
		Window:          ConversationWindow{Strategy: WindowSummary, Budget: 4000, BufferSize: 20, FreshTail: 5},
		Compaction:      ConversationCompaction{Threshold: 0.75, ChunkSize: 20, CondenseGroupSize: 4, MaxDepth: 4},
		Limits:          defaultConversationLimits,
		ExtractionScope: ExtractionScopeOwner,
	}
}

// defaultConversationLimits: why each default, see docs/security.md
// ("Bounds: turns and quotas"). In short: an agent loop of 250 tool calls
// (two messages each) fits a turn, and so do 200,000 tokens, about the
// context of today's large models (a longer turn cannot be sent to a model
// whole anyway); 100,000 messages is a year of a busy agent in one session
// (the summary DAG keeps long sessions cheap to read), while what scales
// with a session's length (the episode's turn count, compaction) stays bounded.
var defaultConversationLimits = ConversationLimits{MaxMessagesPerTurn: 50, MaxMessageBytes: 32 << 10,
	MaxTurnMessages: 500, MaxTurnTokens: 200_000, MaxMessagesPerSession: 100_000}

// Resolved returns c with every zero field set to its default.
func (c ConversationPolicy) Resolved() ConversationPolicy {
	d := DefaultConversationPolicy()
	if c.Window.Strategy == "" {
		c.Window.Strategy = d.Window.Strategy
	}
	orDefault := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	orDefault(&c.Window.Budget, d.Window.Budget)
	orDefault(&c.Window.BufferSize, d.Window.BufferSize)
	orDefault(&c.Window.FreshTail, d.Window.FreshTail)
	orDefault(&c.Compaction.ChunkSize, d.Compaction.ChunkSize)
	orDefault(&c.Compaction.CondenseGroupSize, d.Compaction.CondenseGroupSize)
	orDefault(&c.Compaction.MaxDepth, d.Compaction.MaxDepth)
	orDefault(&c.Limits.MaxMessagesPerTurn, d.Limits.MaxMessagesPerTurn)
	orDefault(&c.Limits.MaxMessageBytes, d.Limits.MaxMessageBytes)
	orDefault(&c.Limits.MaxTurnMessages, d.Limits.MaxTurnMessages)
	orDefault(&c.Limits.MaxTurnTokens, d.Limits.MaxTurnTokens)
	orDefault(&c.Limits.MaxMessagesPerSession, d.Limits.MaxMessagesPerSession)
	if c.Compaction.Threshold == 0 {
		c.Compaction.Threshold = d.Compaction.Threshold
	}
	if c.ExtractionScope == "" {
		c.ExtractionScope = d.ExtractionScope
	}
	return c
}

// Validate checks the resolved policy; every problem names its field under
// "conversation.".
func (c ConversationPolicy) Validate() error {
	c = c.Resolved()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("conversation.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch c.Window.Strategy {
	case WindowBuffer, WindowToken, WindowSummary:
	default:
		bad("window.strategy", "%q must be buffer, token or summary", c.Window.Strategy)
	}
	for _, v := range []struct {
		field    string
		val      int
		min, max int
	}{
		{"window.budget", c.Window.Budget, 1, MaxWindowBudget},
		{"window.bufferSize", c.Window.BufferSize, 1, MaxBufferSize},
		{"window.freshTail", c.Window.FreshTail, 1, MaxFreshTail},
		{"compaction.chunkSize", c.Compaction.ChunkSize, 2, MaxChunkSize},
		{"compaction.condenseGroupSize", c.Compaction.CondenseGroupSize, 2, MaxCondenseGroupSize},
		{"compaction.maxDepth", c.Compaction.MaxDepth, 1, MaxSummaryDepth},
		{"limits.maxMessagesPerTurn", c.Limits.MaxMessagesPerTurn, 1, MaxMessagesPerTurnCap},
		{"limits.maxMessageBytes", c.Limits.MaxMessageBytes, 16, MaxMessageBytesCap},
		{"limits.maxTurnMessages", c.Limits.MaxTurnMessages, 1, MaxTurnMessagesCap},
		{"limits.maxTurnTokens", c.Limits.MaxTurnTokens, MinTurnTokens, MaxTurnTokensCap},
		{"limits.maxMessagesPerSession", c.Limits.MaxMessagesPerSession, 1, MaxMessagesPerSessionCap},
	} {
		if v.val < v.min || v.val > v.max {
			bad(v.field, "%d must be within %d..%d", v.val, v.min, v.max)
		}
	}
	// One append of maxMessagesPerTurn messages continuing a turn must be
	// possible: otherwise the per-append limit would be a lie.
	if c.Limits.MaxTurnMessages < c.Limits.MaxMessagesPerTurn {
		bad("limits.maxTurnMessages", "%d must be at least limits.maxMessagesPerTurn (%d): one append may carry that many messages of one turn",
			c.Limits.MaxTurnMessages, c.Limits.MaxMessagesPerTurn)
	}
	switch c.ExtractionScope {
	case ExtractionScopeOwner, ExtractionScopeSession:
	default:
		bad("extractionScope", "%q must be owner or session", c.ExtractionScope)
	}
	if t := c.Compaction.Threshold; !(t > 0 && t <= 1) {
		bad("compaction.threshold", "%g must satisfy 0 < threshold <= 1", t)
	}
	if c.SessionIdleTTL < 0 || c.ArchiveAfter < 0 {
		bad("sessionIdleTTL", "sessionIdleTTL and archiveAfter must not be negative")
	}
	if c.SessionIdleTTL > 0 && c.ArchiveAfter > 0 && c.ArchiveAfter >= c.SessionIdleTTL {
		bad("archiveAfter", "%s must be shorter than sessionIdleTTL %s: sessions would be deleted before they are archived", c.ArchiveAfter, c.SessionIdleTTL)
	}
	return errors.Join(errs...)
}

// WindowStrategy selects how a context window is built.
type WindowStrategy string

// Window strategies.
const (
	// WindowBuffer: the last N messages.
	WindowBuffer WindowStrategy = "buffer"
	// WindowToken: the newest messages within the budget.
	WindowToken WindowStrategy = "token"
	// WindowSummary: summaries of older turns, then recent messages, within the budget.
	WindowSummary WindowStrategy = "summary"
)
