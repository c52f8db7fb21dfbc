package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-dev/engram/internal/memory"
)

// MCP tools of long-term memory (docs/mcp.md, docs/long-term.md): an agent
// extracts the facts of its conversation, recalls past sessions through
// their episodes, reads the user's profile and constraints and keeps the
// profile up to date. Constraints are the user's: no tool writes them. The
// owner comes from the credential when it is bound, as for every tool.

type mcpExtractSessionArgs struct {
	Owner   string `json:"owner,omitempty" jsonschema:"the end user of the conversation; leave out when the token is bound to one owner"`
	Session string `json:"session" jsonschema:"session id; facts are extracted from its messages not extracted before"`
	Source  string `json:"source,omitempty" jsonschema:"agent, the only source of MCP writes (the default); user and system are refused whatever the token"`
}

type mcpEpisodeArgs struct {
	Owner string `json:"owner,omitempty" jsonschema:"the end user whose past sessions are searched; leave out when the token is bound to one owner"`
	Query string `json:"query,omitempty" jsonschema:"what to look for, in natural language; empty lists the newest episodes"`
	Agent string `json:"agent,omitempty" jsonschema:"only this agent's episodes (plus those of no agent)"`
	Limit int    `json:"limit,omitempty" jsonschema:"number of results, default 10, at most 50"`
}

type mcpReadDocumentArgs struct {
	Owner   string `json:"owner,omitempty" jsonschema:"the end user; leave out when the token is bound to one owner"`
	Agent   string `json:"agent,omitempty" jsonschema:"agent id; empty means the document shared by all agents"`
	Version int64  `json:"version,omitempty" jsonschema:"a past version; 0 or absent means the current one"`
}

type mcpUpdateProfileArgs struct {
	Owner     string `json:"owner,omitempty" jsonschema:"the end user; leave out when the token is bound to one owner"`
	Agent     string `json:"agent,omitempty" jsonschema:"agent id; empty means the profile shared by all agents"`
	Content   string `json:"content" jsonschema:"the whole new profile as plain text (Markdown is fine), at most 8 KiB; it replaces the previous version"`
	IfVersion *int64 `json:"ifVersion,omitempty" jsonschema:"write only if the profile is still at this version (from read_profile), so a concurrent change is not lost"`
}

// addLongTermTools registers the long-term memory tools on srv.
func (t tools) addLongTermTools(s *Server, srv *mcp.Server) {
	addTool(s, srv, "extract_session", t.extractSession,
		"Extract durable facts about the user from a session's new messages and remember them (needs the runtime's LLM; at most two model calls).")
	addTool(s, srv, "search_episodes", t.searchEpisodes,
		"Find summaries of an owner's past sessions relevant to a query, best first.")
	addTool(s, srv, "read_profile", t.readDocument(memory.DocProfile),
		"The owner's profile for an agent: what is known about the user, as text, with its version.")
	addTool(s, srv, "read_constraints", t.readDocument(memory.DocConstraints),
		"The owner's constraints for an agent: the user's rules, as text, with its version. Only the user changes them.")
	addTool(s, srv, "update_profile", t.updateProfile,
		"Replace the owner's profile for an agent with a new version (recorded in the changelog as written by the agent).")
}

func (t tools) extractSession(ctx context.Context, a mcpExtractSessionArgs) (*memory.SessionExtractResult, error) {
	owner, src, err := mcpWriter(ctx, a.Owner, a.Source)
	if err != nil {
		return nil, err
	}
	if ctx, err = t.llm(ctx); err != nil {
		return nil, err
	}
	return t.ops.extractSession(ctx, memory.SessionExtractRequest{Owner: owner, SessionID: a.Session, Source: src})
}

func (t tools) searchEpisodes(ctx context.Context, a mcpEpisodeArgs) (*episodeSearchResponse, error) {
	owner, err := mcpOwner(ctx, a.Owner)
	if err != nil {
		return nil, err
	}
	return t.ops.searchEpisodes(ctx, memory.EpisodeSearchRequest{Owner: owner, Agent: a.Agent, Query: a.Query, Limit: a.Limit,
		MaxBytes: t.answerBytes()})
}

func (t tools) readDocument(kind memory.DocumentKind) func(context.Context, mcpReadDocumentArgs) (*memory.Document, error) {
	return func(ctx context.Context, a mcpReadDocumentArgs) (*memory.Document, error) {
		owner, err := mcpOwner(ctx, a.Owner)
		if err != nil {
			return nil, err
		}
		return t.ops.getDocument(ctx, memory.GetDocumentRequest{Owner: owner, Agent: a.Agent, Kind: kind, Version: a.Version})
	}
}

// updateProfile writes the profile as source agent whatever the token:
// a model states what it learnt, never what the user asserted.
func (t tools) updateProfile(ctx context.Context, a mcpUpdateProfileArgs) (*memory.Document, error) {
	owner, err := mcpOwner(ctx, a.Owner)
	if err != nil {
		return nil, err
	}
	return t.ops.putDocument(ctx, memory.PutDocumentRequest{Owner: owner, Agent: a.Agent, Kind: memory.DocProfile,
		Content: a.Content, Source: memory.SourceAgent, IfVersion: a.IfVersion})
}
