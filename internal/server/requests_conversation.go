package server

import (
	"github.com/engram-dev/engram/internal/memory"
)

// Request and response bodies of the conversation routes
// (/v1/owners/{owner}/sessions, /summaries, /history; docs/conversation.md).
// As for memories, the owner is never in a body: it is the {owner} of the path.

// createSessionBody is memory.CreateSessionRequest without the owner.
type createSessionBody struct {
	// ID is the session's id; absent means the service generates one.
	ID    string `json:"id,omitempty"`
	Agent string `json:"agent,omitempty"`
	Title string `json:"title,omitempty"`
}

// updateSessionBody changes the metadata of a session; absent or null
// fields stay as they are.
type updateSessionBody struct {
	Title    *string `json:"title,omitempty"`
	Archived *bool   `json:"archived,omitempty"`
}

// turnMessageBody is one message of an appended turn.
type turnMessageBody struct {
	Role       memory.Role `json:"role"`
	Content    string      `json:"content"`
	ToolName   string      `json:"toolName,omitempty"`
	ToolCallID string      `json:"toolCallId,omitempty"`
}

// appendBody is one turn: 1..maxTurnMessages messages stored atomically.
type appendBody struct {
	// Source is who appends, capped by the credential like a memory write:
	// absent means agent, and an agent token cannot claim user.
	Source   memory.Source     `json:"source,omitempty"`
	Messages []turnMessageBody `json:"messages"`
}

func (b appendBody) request(owner, session string, src memory.Source) memory.AppendRequest {
	msgs := make([]memory.TurnMessage, len(b.Messages))
	for i, m := range b.Messages {
		msgs[i] = memory.TurnMessage{Role: m.Role, Content: m.Content, ToolName: m.ToolName, ToolCallID: m.ToolCallID}
	}
	return memory.AppendRequest{Owner: owner, SessionID: session, Source: src, Messages: msgs}
}

// windowBody asks for the context window of a session; zero values mean
// the policy's defaults (spec.conversation of the MemoryPolicy).
type windowBody struct {
	Strategy  memory.WindowStrategy `json:"strategy,omitempty"`
	Budget    int                   `json:"budget,omitempty"`
	FreshTail int                   `json:"freshTail,omitempty"`
	Last      int                   `json:"last,omitempty"`
}

// compactBody asks for a compaction of one session.
type compactBody struct {
	Mode  memory.CompactMode `json:"mode,omitempty"`
	Force bool               `json:"force,omitempty"`
}

// historySearchBody searches the messages and summaries of an owner.
type historySearchBody struct {
	Query     string `json:"query"`
	SessionID string `json:"sessionId,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// The answers of the message list and the history search are the
// engine's, bounded and saying what they left out (docs/api.md).
type (
	messagesResponse      = memory.MessagePage
	historySearchResponse = memory.HistorySearchResult
)
