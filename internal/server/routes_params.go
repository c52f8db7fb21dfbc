package server

// The query parameters of the REST routes, with their descriptions: the one
// source of both. The adapter refuses any other parameter (operation.go),
// and TestQueryParamsMatchOpenAPI checks that openapi.yaml documents each
// route's parameters with these names and descriptions, in this order.

var (
	pageLimit50 = param{"limit", "Page size; 0 means 50."}
	pageCursor  = param{"cursor", "The nextCursor of the previous page."}
	docAgent    = param{"agent", "The agent the document is for; absent or empty means the document shared by all agents."}
)

// listParams: GET /v1/owners/{owner}/memories.
var listParams = params{
	{"agent", "Only memories of this agent."},
	{"session", "Only memories of this session."},
	{"category", "Only memories of this category."},
	{"include", "Comma-separated kinds of memories left out by default: expired (past expiresAt, not yet deactivated by the expire job), inactive (deleted, expired, forgotten, superseded)."},
	{"includeInactive", "Also list deleted, expired, forgotten and superseded memories (the same as include=inactive)."},
	{"filter", "Only memories whose metadata, tags and timestamps (createdAt, updatedAt ranges) match this filter: the JSON of a Filter (see \"Filters\" in docs/api.md), URL-encoded."},
	pageLimit50,
	pageCursor,
}

// deleteParams: DELETE /v1/owners/{owner}/memories/{id}.
var deleteParams = params{{"source", "Who deletes; absent means agent; protected categories accept only `user`."}}

// historyParams: GET /v1/owners/{owner}/memories/{id}/history.
var historyParams = params{{"limit", "Page size; 0 means 100."}, pageCursor}

// ownersParams: GET /v1/owners.
var ownersParams = params{pageLimit50, pageCursor}

// sessionListParams: GET /v1/owners/{owner}/sessions.
var sessionListParams = params{
	{"agent", "Only sessions of this agent."},
	{"archived", "true: only archived sessions; false: only the others; absent: both."},
	pageLimit50,
	pageCursor,
}

// messageParams: GET /v1/owners/{owner}/sessions/{id}/messages.
var messageParams = params{
	{"from", "First seq of the range (inclusive); absent or 0 means from the start."},
	{"to", "End of the range (exclusive); absent or 0 means to the end."},
	{"last", "The last N messages instead of a range (not with from or to)."},
}

// expandParams: GET /v1/owners/{owner}/summaries/{id}/expand.
var expandParams = params{{"maxTokens", "Cap on the tokens of the messages returned (the oldest that fit, within the byte cap too); absent or 0 means 20,000. `truncated` and the seq range [`omittedFrom`, `omittedTo`) say when more exist."}}

// episodeParams: GET /v1/owners/{owner}/episodes.
var episodeParams = params{
	{"query", "What to look for; at most policy limits.maxQueryBytes bytes."},
	{"agent", "Only this agent's episodes (and those of sessions without an agent)."},
	{"limit", "Number of results; 0 means 10."},
}

// documentParams: GET /v1/owners/{owner}/profile|constraints.
var documentParams = params{docAgent, {"version", "A past version; absent or 0 means the current one."}}

// putDocumentParams: PUT /v1/owners/{owner}/profile|constraints.
var putDocumentParams = params{docAgent}

// changelogParams: GET /v1/owners/{owner}/changelog.
var changelogParams = params{
	{"scope", "Only this document kind; absent means both."},
	{"agent", "Only this agent's documents; present and empty (agent=) means the documents shared by all agents; absent means every agent's."},
	pageLimit50,
	pageCursor,
}

// globalListParams: GET /v1/global/memories.
var globalListParams = params{{"category", "Only this global category."}, pageLimit50, pageCursor}

// deleteGlobalParams: DELETE /v1/global/memories/{id}.
var deleteGlobalParams = params{{"source", "Who deletes; absent means system."}}
