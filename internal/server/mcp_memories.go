package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/engram-dev/engram/internal/memory"
)

// tools are the MCP tools: each translates its arguments into a request of
// the capability it serves (ops, shared with REST) and returns its result.
// The owner is an argument (one agent serves many end users) unless the
// token is bound to one owner: then that owner is the only one, and the
// argument may be left out. The SDK infers the JSON schema of each tool
// from its argument type and rejects calls that do not fit it before the
// tool runs.
type tools struct {
	ops *ops
	// llm takes a token of the LLM rate limit (mcpLLM).
	llm func(context.Context) (context.Context, error)
}

// addMemoryTools registers the memory tools on srv.
func (t tools) addMemoryTools(s *Server, srv *mcp.Server) {
	addTool(s, srv, "add_memory", t.add,
		"Remember one fact about an owner (deduplicated against what is known).")
	addTool(s, srv, "search_memory", t.search,
		"Find an owner's memories relevant to a query, best first.")
	addTool(s, srv, "list_memories", t.list,
		"List an owner's memories, newest first, one page at a time.")
	addTool(s, srv, "delete_memory", t.delete,
		"Forget one memory of an owner.")
	addTool(s, srv, "supersede_memory", t.supersede,
		"Mark one memory of an owner as replaced by another, newer one (a memory is replaced once).")
	addTool(s, srv, "get_context", t.context,
		"An owner's memories rendered as text for a prompt, within a token budget.")
}

type mcpAddArgs struct {
	Owner      string         `json:"owner,omitempty" jsonschema:"the end user the memory is about; leave out when the token is bound to one owner"`
	Content    string         `json:"content" jsonschema:"the fact to remember, one short sentence"`
	Category   string         `json:"category,omitempty" jsonschema:"category of the policy, e.g. identity, preference, project, contextual"`
	Importance int            `json:"importance,omitempty" jsonschema:"1..10, default 5"`
	Agent      string         `json:"agent,omitempty" jsonschema:"agent id, to scope the memory to one agent"`
	Session    string         `json:"session,omitempty" jsonschema:"session id, to scope the memory to one session"`
	TTL        string         `json:"ttl,omitempty" jsonschema:"lifetime overriding the category's, e.g. 7d; 0 = never"`
	Source     string         `json:"source,omitempty" jsonschema:"agent, the only source of MCP writes (the default); user and system are refused whatever the token"`
	Embedding  []float32      `json:"embedding,omitempty" jsonschema:"your own embedding of content, of the runtime's dimensions; Engram then calls no embedder"`
	Metadata   map[string]any `json:"metadata,omitempty" jsonschema:"a JSON object about the fact (e.g. its source or project); at most 64 keys, 4 levels, 4096 bytes"`
	Tags       []string       `json:"tags,omitempty" jsonschema:"labels of the fact, at most 20 distinct strings of 1-64 bytes"`
}

type mcpSearchArgs struct {
	Owner      string         `json:"owner,omitempty" jsonschema:"the end user whose memories are searched; leave out when the token is bound to one owner"`
	Query      string         `json:"query,omitempty" jsonschema:"what to look for, in natural language; may be left out in vector mode when vector is given"`
	Vector     []float32      `json:"vector,omitempty" jsonschema:"your own embedding of the query, of the runtime's dimensions (vector and hybrid modes); Engram then calls no embedder"`
	TopK       int            `json:"topK,omitempty" jsonschema:"number of results; default from the policy"`
	Mode       string         `json:"mode,omitempty" jsonschema:"hybrid (default), vector or text"`
	Categories []string       `json:"categories,omitempty" jsonschema:"only these categories"`
	Filter     map[string]any `json:"filter,omitempty" jsonschema:"only memories whose metadata, tags and timestamps match (the schema spells out the grammar)"`
	Agent      string         `json:"agent,omitempty" jsonschema:"agent id: its memories plus the owner's shared ones"`
	Session    string         `json:"session,omitempty" jsonschema:"session id: its memories plus the owner's shared ones"`
	Rerank     *bool          `json:"rerank,omitempty" jsonschema:"false skips the policy's reranker for this search (default: rerank when the policy has one)"`
}

type mcpListArgs struct {
	Owner           string         `json:"owner,omitempty" jsonschema:"the end user whose memories are listed; leave out when the token is bound to one owner"`
	Category        string         `json:"category,omitempty" jsonschema:"only this category"`
	Agent           string         `json:"agent,omitempty" jsonschema:"only this agent's memories"`
	Session         string         `json:"session,omitempty" jsonschema:"only this session's memories"`
	IncludeInactive bool           `json:"includeInactive,omitempty" jsonschema:"also deleted, expired and superseded memories"`
	IncludeExpired  bool           `json:"includeExpired,omitempty" jsonschema:"also memories past their expiry that are not deactivated yet"`
	Limit           int            `json:"limit,omitempty" jsonschema:"page size, default 50, at most 500"`
	Cursor          string         `json:"cursor,omitempty" jsonschema:"nextCursor of the previous page"`
	Filter          map[string]any `json:"filter,omitempty" jsonschema:"only memories whose metadata, tags and timestamps match (the grammar of search_memory's filter)"`
}

type mcpDeleteArgs struct {
	Owner  string `json:"owner,omitempty" jsonschema:"the end user the memory belongs to; leave out when the token is bound to one owner"`
	ID     string `json:"id" jsonschema:"id of the memory to delete"`
	Source string `json:"source,omitempty" jsonschema:"agent, the only source of MCP writes (the default); user and system are refused whatever the token, so protected memories are not deleted over MCP"`
}

type mcpDeleteResult struct {
	Deleted bool   `json:"deleted"`
	ID      string `json:"id"`
}

type mcpSupersedeArgs struct {
	Owner  string `json:"owner,omitempty" jsonschema:"the end user the memories belong to; leave out when the token is bound to one owner"`
	ID     string `json:"id" jsonschema:"id of the memory that is no longer true"`
	By     string `json:"by" jsonschema:"id of the active memory that replaces it"`
	Source string `json:"source,omitempty" jsonschema:"agent, the only source of MCP writes (the default); user and system are refused whatever the token"`
}

type mcpContextArgs struct {
	Owner     string         `json:"owner,omitempty" jsonschema:"the end user whose memories are rendered; leave out when the token is bound to one owner"`
	Query     string         `json:"query,omitempty" jsonschema:"the current task or message, to put relevant memories first"`
	MaxTokens int            `json:"maxTokens,omitempty" jsonschema:"token budget, default 1000"`
	Agent     string         `json:"agent,omitempty" jsonschema:"agent id"`
	Session   string         `json:"session,omitempty" jsonschema:"session id"`
	Filter    map[string]any `json:"filter,omitempty" jsonschema:"only memories whose metadata, tags and timestamps match are rendered (the grammar of search_memory's filter)"`
}

func (t tools) add(ctx context.Context, a mcpAddArgs) (*memory.AddResult, error) {
	owner, src, err := mcpWriter(ctx, a.Owner, a.Source)
	if err != nil {
		return nil, err
	}
	metadata, err := mcpMetadata(a.Metadata)
	if err != nil {
		return nil, err
	}
	return t.ops.add(ctx, memory.AddRequest{Owner: owner, Metadata: metadata, Tags: a.Tags, Agent: a.Agent, Session: a.Session,
		Source: src, Content: a.Content, Category: a.Category, Importance: a.Importance, TTL: a.TTL, Embedding: a.Embedding})
}

func (t tools) search(ctx context.Context, a mcpSearchArgs) (*searchResponse, error) {
	owner, filter, err := mcpOwnerFilter(ctx, a.Owner, a.Filter)
	if err != nil {
		return nil, err
	}
	return t.ops.search(ctx, memory.SearchRequest{Owner: owner, Agent: a.Agent, Session: a.Session,
		Query: a.Query, Vector: a.Vector, Filter: filter, Mode: memory.SearchMode(a.Mode), TopK: a.TopK, Categories: a.Categories, MaxBytes: t.answerBytes(), Rerank: a.Rerank})
}

func (t tools) list(ctx context.Context, a mcpListArgs) (*memory.ListPage, error) {
	owner, filter, err := mcpOwnerFilter(ctx, a.Owner, a.Filter)
	if err != nil {
		return nil, err
	}
	return t.ops.list(ctx, memory.ListRequest{Owner: owner, Agent: a.Agent, Session: a.Session,
		Category: a.Category, IncludeInactive: a.IncludeInactive, IncludeExpired: a.IncludeExpired, Limit: a.Limit, Cursor: a.Cursor, Filter: filter,
		MaxBytes: t.answerBytes()})
}

func (t tools) delete(ctx context.Context, a mcpDeleteArgs) (mcpDeleteResult, error) {
	if fe := uuidField("id", a.ID); fe != nil {
		return mcpDeleteResult{}, &memory.ValidationError{Fields: []memory.FieldError{*fe}}
	}
	owner, source, err := mcpWriter(ctx, a.Owner, a.Source)
	if err != nil {
		return mcpDeleteResult{}, err
	}
	if err := t.ops.store.Delete(ctx, owner, a.ID, source); err != nil {
		return mcpDeleteResult{}, err
	}
	return mcpDeleteResult{Deleted: true, ID: a.ID}, nil
}

// supersede is POST .../supersede as a tool: the same checks, and a
// memory that is already superseded is a conflict (409 in REST).
func (t tools) supersede(ctx context.Context, a mcpSupersedeArgs) (*memory.Memory, error) {
	var fields []memory.FieldError
	for _, f := range [][2]string{{"id", a.ID}, {"by", a.By}} {
		if fe := uuidField(f[0], f[1]); fe != nil {
			fields = append(fields, *fe)
		}
	}
	if len(fields) > 0 {
		return nil, &memory.ValidationError{Fields: fields}
	}
	owner, source, err := mcpWriter(ctx, a.Owner, a.Source)
	if err != nil {
		return nil, err
	}
	return t.ops.supersede(ctx, owner, a.ID, a.By, source)
}

func (t tools) context(ctx context.Context, a mcpContextArgs) (*memory.ContextResult, error) {
	owner, filter, err := mcpOwnerFilter(ctx, a.Owner, a.Filter)
	if err != nil {
		return nil, err
	}
	return t.ops.context(ctx, memory.ContextRequest{Owner: owner, Agent: a.Agent, Session: a.Session,
		Query: a.Query, MaxTokens: a.MaxTokens, Filter: filter, MaxBytes: t.answerBytes()})
}
