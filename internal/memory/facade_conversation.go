package memory

import "github.com/engram-dev/engram/internal/memory/conversation"

// The types of conversation memory live in internal/memory/conversation;
// these names keep the façade's API (the service, the benchmarks and the
// tests use them). ConversationMessage is conversation.Message: inside its
// package the word "conversation" goes without saying.

type (
	AppendRequest         = conversation.AppendRequest
	AppendResult          = conversation.AppendResult
	CompactMode           = conversation.CompactMode
	CompactSessionRequest = conversation.CompactSessionRequest
	CompactSessionResult  = conversation.CompactSessionResult
	ConversationMessage   = conversation.Message
	CreateSessionRequest  = conversation.CreateSessionRequest
	ExpandRequest         = conversation.ExpandRequest
	Expansion             = conversation.Expansion
	HistoryHit            = conversation.HistoryHit
	HistorySearchRequest  = conversation.HistorySearchRequest
	HistorySearchResult   = conversation.HistorySearchResult
	ListSessionsRequest   = conversation.ListSessionsRequest
	MessagePage           = conversation.MessagePage
	MessagesRequest       = conversation.MessagesRequest
	Role                  = conversation.Role
	Session               = conversation.Session
	SessionPage           = conversation.SessionPage
	Summary               = conversation.Summary
	SummaryDescription    = conversation.SummaryDescription
	Truncation            = conversation.Truncation
	TurnMessage           = conversation.TurnMessage
	UpdateSessionRequest  = conversation.UpdateSessionRequest
	Window                = conversation.Window
	WindowItem            = conversation.WindowItem
	WindowRequest         = conversation.WindowRequest
)

// Roles of a message, kinds of a window item or history hit, summary
// methods and compaction modes.
const (
	RoleUser            = conversation.RoleUser
	RoleAssistant       = conversation.RoleAssistant
	RoleSystem          = conversation.RoleSystem
	RoleTool            = conversation.RoleTool
	KindMessage         = conversation.KindMessage
	KindSummary         = conversation.KindSummary
	MethodLLM           = conversation.MethodLLM
	MethodLLMAggressive = conversation.MethodLLMAggressive
	MethodExtractive    = conversation.MethodExtractive
	CompactIncremental  = conversation.CompactIncremental
	CompactFull         = conversation.CompactFull
)

// Bounds of the conversation reads.
const (
	DefaultExpandTokens = conversation.DefaultExpandTokens
	MaxExpandTokens     = conversation.MaxExpandTokens
	MaxHistoryResults   = conversation.MaxHistoryResults
	MaxSnippetChars     = conversation.MaxSnippetChars
)
