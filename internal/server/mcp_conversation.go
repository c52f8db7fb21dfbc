package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-dev/engram/internal/memory"
)

// MCP tools of conversation memory (docs/mcp.md, docs/conversation.md):
// an agent appends the turns of its conversation, asks for the window that
// fits its next prompt, searches what was said and expands a summary back
// into the messages it replaced. The owner comes from the credential when
// it is bound, exactly as for the memory tools.

type mcpTurnMessage struct {
	Role       string `json:"role" jsonschema:"user, assistant, system or tool"`
	Content    string `json:"content" jsonschema:"the text of the message, stored verbatim"`
	ToolName   string `json:"toolName,omitempty" jsonschema:"for a tool call or result: the tool's name"`
	ToolCallID string `json:"toolCallId,omitempty" jsonschema:"for a tool call or result: the call id that pairs them"`
}

type mcpAppendArgs struct {
	Owner    string           `json:"owner,omitempty" jsonschema:"the end user of the conversation; leave out when the token is bound to one owner"`
	Session  string           `json:"session" jsonschema:"session id; the session is created on its first turn"`
	Agent    string           `json:"agent,omitempty" jsonschema:"agent id recorded on the session when this turn creates it"`
	Messages []mcpTurnMessage `json:"messages" jsonschema:"the messages of one turn, in order, stored atomically"`
	Source   string           `json:"source,omitempty" jsonschema:"agent, the only source of MCP writes (the default), stored with every message of the turn; user and system are refused whatever the token. An extraction from these messages writes as agent at most"`
}

type mcpWindowArgs struct {
	Owner     string `json:"owner,omitempty" jsonschema:"the end user of the conversation; leave out when the token is bound to one owner"`
	Session   string `json:"session" jsonschema:"session id"`
	Strategy  string `json:"strategy,omitempty" jsonschema:"buffer (last N messages), token (newest messages within the budget) or summary (summaries of older turns + recent messages); default from the policy"`
	Budget    int    `json:"budget,omitempty" jsonschema:"token budget of the window; default from the policy"`
	FreshTail int    `json:"freshTail,omitempty" jsonschema:"newest messages always kept verbatim; default from the policy"`
	Last      int    `json:"last,omitempty" jsonschema:"buffer strategy: number of messages; default from the policy"`
}

type mcpHistoryArgs struct {
	Owner   string `json:"owner,omitempty" jsonschema:"the end user whose conversations are searched; leave out when the token is bound to one owner"`
	Query   string `json:"query" jsonschema:"what to look for, in natural language"`
	Session string `json:"session,omitempty" jsonschema:"only this session"`
	Limit   int    `json:"limit,omitempty" jsonschema:"number of results, default and at most 20"`
}

type mcpExpandArgs struct {
	Owner     string `json:"owner,omitempty" jsonschema:"the end user the summary belongs to; leave out when the token is bound to one owner"`
	ID        string `json:"id" jsonschema:"id of the summary (from get_window or search_history)"`
	MaxTokens int    `json:"maxTokens,omitempty" jsonschema:"cap on the tokens of the messages returned, default 20000"`
}

// addConversationTools registers the conversation tools on srv.
func (t tools) addConversationTools(s *Server, srv *mcp.Server) {
	addTool(s, srv, "append_turn", t.appendTurn,
		"Append one turn (one or more messages) to a conversation session of an owner; the session is created on its first turn.")
	addTool(s, srv, "get_window", t.window,
		"The messages (and summaries of older turns) of a session that fit the next prompt, oldest first, within a token budget.")
	addTool(s, srv, "search_history", t.searchHistory,
		"Search what was said in an owner's conversations (messages and summaries), best first.")
	addTool(s, srv, "expand_summary", t.expand,
		"The original messages a summary replaced, verbatim, oldest first.")
}

// appendTurn is POST .../sessions/{id}/messages as a tool, creating the
// session on its first turn (an agent over MCP has no other way to).
func (t tools) appendTurn(ctx context.Context, a mcpAppendArgs) (*memory.AppendResult, error) {
	owner, src, err := mcpWriter(ctx, a.Owner, a.Source)
	if err != nil {
		return nil, err
	}
	msgs := make([]turnMessageBody, len(a.Messages))
	for i, m := range a.Messages {
		msgs[i] = turnMessageBody{Role: memory.Role(m.Role), Content: m.Content, ToolName: m.ToolName, ToolCallID: m.ToolCallID}
	}
	req := appendBody{Messages: msgs}.request(owner, a.Session, src)
	req.MaxBytes = t.answerBytes()
	return t.ops.appendCreating(ctx, req, a.Agent)
}

func (t tools) window(ctx context.Context, a mcpWindowArgs) (*memory.Window, error) {
	owner, err := mcpOwner(ctx, a.Owner)
	if err != nil {
		return nil, err
	}
	return t.ops.window(ctx, memory.WindowRequest{Owner: owner, SessionID: a.Session,
		Strategy: memory.WindowStrategy(a.Strategy), Budget: a.Budget, FreshTail: a.FreshTail, Last: a.Last,
		MaxBytes: t.answerBytes()})
}

func (t tools) searchHistory(ctx context.Context, a mcpHistoryArgs) (*memory.HistorySearchResult, error) {
	owner, err := mcpOwner(ctx, a.Owner)
	if err != nil {
		return nil, err
	}
	return t.ops.searchHistory(ctx, memory.HistorySearchRequest{Owner: owner, Query: a.Query, SessionID: a.Session, Limit: a.Limit,
		MaxBytes: t.answerBytes()})
}

func (t tools) expand(ctx context.Context, a mcpExpandArgs) (*memory.Expansion, error) {
	if fe := uuidField("id", a.ID); fe != nil {
		return nil, &memory.ValidationError{Fields: []memory.FieldError{*fe}}
	}
	owner, err := mcpOwner(ctx, a.Owner)
	if err != nil {
		return nil, err
	}
	return t.ops.expand(ctx, memory.ExpandRequest{Owner: owner, ID: a.ID, MaxTokens: a.MaxTokens, MaxBytes: t.answerBytes()})
}

// mcpResultOverhead bounds what a tool result adds around the answer's
// two copies (the JSON-RPC envelope, the content block's keys).
const mcpResultOverhead = 1024

// mcpAnswerBytes is the byte cap of an answer given by an MCP tool. The
// result carries the answer twice — as structuredContent and, for clients
// that read only text, as its JSON in a text block, where escaping can
// double it — so a third of the runtime's cap keeps the whole result
// within the cap.
func (t tools) answerBytes() int {
	return (t.ops.store.MaxResponseBytes() - mcpResultOverhead) / 3
}
