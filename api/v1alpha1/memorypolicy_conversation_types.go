package v1alpha1

// WindowStrategy is how a context window of a conversation is built.
// +kubebuilder:validation:Enum=buffer;token;summary
type WindowStrategy string

const (
	// WindowBuffer keeps the last N messages.
	WindowBuffer WindowStrategy = "buffer"
	// WindowToken keeps the newest messages within the token budget.
	WindowToken WindowStrategy = "token"
	// WindowSummary puts summaries of older turns before the recent messages.
	WindowSummary WindowStrategy = "summary"
)

// ConversationSpec configures conversation memory: sessions, their context
// windows and the summary DAG that compacts old turns without losing them
// (docs/conversation.md).
// +kubebuilder:validation:XValidation:rule="!has(self.sessionIdleTTL) || !has(self.archiveAfter) || self.sessionIdleTTL == '0' || self.archiveAfter == '0' || int(self.archiveAfter.substring(0, self.archiveAfter.size() - 1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.archiveAfter.substring(self.archiveAfter.size() - 1)] < int(self.sessionIdleTTL.substring(0, self.sessionIdleTTL.size() - 1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.sessionIdleTTL.substring(self.sessionIdleTTL.size() - 1)]",message="conversation.archiveAfter must be shorter than conversation.sessionIdleTTL: sessions would be deleted before they are archived"
type ConversationSpec struct {
	// Window holds the defaults of a context-window request.
	// +optional
	// +kubebuilder:default={}
	Window ConversationWindowSpec `json:"window"`

	// Compaction configures the summary DAG.
	// +optional
	// +kubebuilder:default={}
	Compaction ConversationCompactionSpec `json:"compaction"`

	// SessionIdleTTL: the RetentionJob operation "sessions" deletes sessions
	// idle (no message appended) for longer, with their messages and
	// summaries. "0" keeps them forever.
	// +optional
	// +kubebuilder:default="0"
	SessionIdleTTL Duration `json:"sessionIdleTTL,omitempty"`

	// ArchiveAfter: the operation "sessions" archives sessions idle for
	// longer (an archived session refuses appends until unarchived). "0"
	// never archives. Shorter than sessionIdleTTL when both are set.
	// +optional
	// +kubebuilder:default="0"
	ArchiveAfter Duration `json:"archiveAfter,omitempty"`

	// Limits bound one append, one turn and one session.
	// +optional
	// +kubebuilder:default={}
	Limits ConversationLimitsSpec `json:"limits"`

	// ExtractOnEnd: ending a session (POST .../sessions/{id}/end) also
	// extracts long-term facts from its new messages, when the runtime has
	// an LLM (spec.llm).
	// +optional
	ExtractOnEnd bool `json:"extractOnEnd,omitempty"`

	// ExtractionScope is the scope of the facts extracted from a session:
	// owner (the default) makes them the owner's, found from every session
	// of the owner; session keeps them to the session they came from.
	// Either way a fact records its session as sourceSession.
	// +optional
	// +kubebuilder:default=owner
	ExtractionScope ExtractionScope `json:"extractionScope,omitempty"`
}

// ExtractionScope is the scope of facts extracted from a conversation session.
// +kubebuilder:validation:Enum=owner;session
type ExtractionScope string

const (
	// ExtractionScopeOwner: extracted facts belong to the owner.
	ExtractionScopeOwner ExtractionScope = "owner"
	// ExtractionScopeSession: extracted facts stay scoped to their session.
	ExtractionScopeSession ExtractionScope = "session"
)

// ConversationWindowSpec holds the defaults of a window request.
type ConversationWindowSpec struct {
	// Strategy is buffer (last N messages), token (newest messages within
	// the budget) or summary (summaries of older turns, then recent messages).
	// +optional
	// +kubebuilder:default=summary
	Strategy WindowStrategy `json:"strategy,omitempty"`

	// Budget of a window, in tokens (about 4 characters of English or 1.5
	// CJK characters a token).
	// +optional
	// +kubebuilder:default=4000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Budget int32 `json:"budget,omitempty"`

	// BufferSize is N of the buffer strategy.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	BufferSize int32 `json:"bufferSize,omitempty"`

	// FreshTail is how many of the newest messages every window keeps
	// verbatim (whole turns: extended back to the turn's user message),
	// even over the budget; compaction never summarizes them.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	FreshTail int32 `json:"freshTail,omitempty"`
}

// ConversationCompactionSpec configures the summary DAG: leaf summaries over
// chunks of messages, condensed summaries over groups of summaries.
type ConversationCompactionSpec struct {
	// Threshold: a session is due for compaction when its unsummarized
	// tokens exceed threshold × window.budget.
	// +optional
	// +kubebuilder:default=0.75
	// +kubebuilder:validation:XValidation:rule="self > 0.0 && self <= 1.0",message="conversation.compaction.threshold must be above 0 and at most 1"
	Threshold float64 `json:"threshold,omitempty"`

	// ChunkSize is how many messages a leaf summary covers (extended to end
	// before the next user message, so a turn is never split).
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=500
	ChunkSize int32 `json:"chunkSize,omitempty"`

	// CondenseGroupSize is how many summaries a condensed summary covers.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:XValidation:rule="self >= 2 && self <= 64",message="conversation.compaction.condenseGroupSize must be within 2..64: a condensed summary covers at least two summaries"
	CondenseGroupSize int32 `json:"condenseGroupSize,omitempty"`

	// MaxDepth is the deepest level of condensed summaries.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 8",message="conversation.compaction.maxDepth must be within 1..8"
	MaxDepth int32 `json:"maxDepth,omitempty"`
}

// ConversationLimitsSpec bounds one append, one turn and one session.
// +kubebuilder:validation:XValidation:rule="!has(self.maxTurnMessages) || !has(self.maxMessagesPerTurn) || self.maxTurnMessages >= self.maxMessagesPerTurn",message="conversation.limits.maxTurnMessages must be at least maxMessagesPerTurn: one append may carry that many messages of one turn"
type ConversationLimitsSpec struct {
	// MaxMessagesPerTurn is the most messages one append may carry.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=500
	MaxMessagesPerTurn int32 `json:"maxMessagesPerTurn,omitempty"`

	// MaxMessageBytes is the largest message content stored (after
	// redaction of secrets), in bytes.
	// +optional
	// +kubebuilder:default=32768
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=1048576
	MaxMessageBytes int32 `json:"maxMessageBytes,omitempty"`

	// MaxTurnMessages is the most messages of one turn (a user or system
	// message and what follows it up to the next one) across all the
	// appends that build it; the append that would pass it is refused
	// (422 turn-too-long) and stores nothing. 500 holds an agent loop of
	// 250 tool calls.
	// +optional
	// +kubebuilder:default=500
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000",message="conversation.limits.maxTurnMessages must be within 1..10000"
	MaxTurnMessages int32 `json:"maxTurnMessages,omitempty"`

	// MaxTurnTokens is the most tokens of one turn across appends, like
	// maxTurnMessages. 200000 is about the context of today's large
	// models: a longer turn could not be sent to one whole.
	// +optional
	// +kubebuilder:default=200000
	// +kubebuilder:validation:XValidation:rule="self >= 1000 && self <= 1000000",message="conversation.limits.maxTurnTokens must be within 1000..1000000 (the largest window budget)"
	MaxTurnTokens int32 `json:"maxTurnTokens,omitempty"`

	// MaxMessagesPerSession is the most messages one session may hold; the
	// append that would pass it is refused (409 quota-exceeded) and
	// stores nothing: start a new session. 100000 is a year of a busy agent.
	// +optional
	// +kubebuilder:default=100000
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 1000000",message="conversation.limits.maxMessagesPerSession must be within 1..1000000"
	MaxMessagesPerSession int32 `json:"maxMessagesPerSession,omitempty"`
}
