package server

import (
	"encoding/json"

	"github.com/engram-dev/engram/internal/memory"
)

// Request and response bodies of the REST API. The owner is never in a body:
// it is the {owner} of the path, so one token-holding client cannot write to
// owner A through a URL of owner B by accident. openapi.yaml describes them.

// addBody is memory.AddRequest without the owner.
type addBody struct {
	Agent      string        `json:"agent,omitempty"`
	Session    string        `json:"session,omitempty"`
	Source     memory.Source `json:"source,omitempty"`
	Content    string        `json:"content"`
	Category   string        `json:"category,omitempty"`
	Importance int           `json:"importance,omitempty"`
	TTL        string        `json:"ttl,omitempty"`
	// Embedding is the client's own vector of Content.
	Embedding jsonVector `json:"embedding,omitempty"`
	// Metadata (a JSON object, kept as sent: numbers exact) and Tags.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
}

func (b addBody) request(owner string) memory.AddRequest {
	return memory.AddRequest{Owner: owner, Agent: b.Agent, Session: b.Session, Source: b.Source,
		Content: b.Content, Category: b.Category, Importance: b.Importance, TTL: b.TTL, Embedding: b.Embedding,
		Metadata: b.Metadata, Tags: b.Tags}
}

// maxBatchItems bounds one batch: large enough for an import in pages, small
// enough that one request cannot hold the owner's lock for long.
const maxBatchItems = 100

type batchBody struct {
	Items []json.RawMessage `json:"items"`
}

type batchResponse struct {
	Results []memory.AddResult `json:"results"`
}

type extractBody struct {
	Agent    string           `json:"agent,omitempty"`
	Session  string           `json:"session,omitempty"`
	Source   memory.Source    `json:"source,omitempty"`
	Messages []memory.Message `json:"messages"`
}

// updateBody is memory.UpdateRequest without owner and id; absent or null
// fields stay as they are.
type updateBody struct {
	Source     memory.Source `json:"source,omitempty"`
	Content    *string       `json:"content,omitempty"`
	Category   *string       `json:"category,omitempty"`
	Importance *int          `json:"importance,omitempty"`
	TTL        *string       `json:"ttl,omitempty"`
	Embedding  jsonVector    `json:"embedding,omitempty"`
	// Metadata replaces the memory's ({} clears it), Tags its tags ([]
	// clears them).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Tags     []string        `json:"tags,omitempty"`
}

type supersedeBody struct {
	By     string        `json:"by"`
	Source memory.Source `json:"source,omitempty"`
}

// searchBody is memory.SearchRequest without the owner.
type searchBody struct {
	Agent      string            `json:"agent,omitempty"`
	Session    string            `json:"session,omitempty"`
	Query      string            `json:"query"`
	Vector     jsonVector        `json:"vector,omitempty"`
	Mode       memory.SearchMode `json:"mode,omitempty"`
	TopK       int               `json:"topK,omitempty"`
	Categories []string          `json:"categories,omitempty"`
	MinScore   float64           `json:"minScore,omitempty"`
	Filter     *memory.Filter    `json:"filter,omitempty"`
	// Rerank: false skips the policy's reranker for this search.
	Rerank *bool `json:"rerank,omitempty"`
}

// searchResponse is the answer of a search: its results within the byte
// cap, and what the cap left out.
type searchResponse = memory.SearchResult

// contextBody is memory.ContextRequest without the owner.
type contextBody struct {
	Agent     string `json:"agent,omitempty"`
	Session   string `json:"session,omitempty"`
	Query     string `json:"query,omitempty"`
	MaxTokens int    `json:"maxTokens,omitempty"`
	// IncludeEpisodes adds the owner's most relevant episodes (at most
	// MaxEpisodes: 0 means 3, at most 10) in their own section.
	IncludeEpisodes bool `json:"includeEpisodes,omitempty"`
	MaxEpisodes     int  `json:"maxEpisodes,omitempty"`
	// Filter keeps only the memories it matches (search's grammar).
	Filter *memory.Filter `json:"filter,omitempty"`
}

// historyResponse is one page of a memory's history.
type historyResponse = memory.HistoryPage

type statusResponse struct {
	Status string `json:"status"`
	// SchemaVersion and LatestSchemaVersion are set by /readyz.
	SchemaVersion       int `json:"schemaVersion,omitempty"`
	LatestSchemaVersion int `json:"latestSchemaVersion,omitempty"`
}
