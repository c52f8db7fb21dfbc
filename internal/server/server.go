// Package server is the HTTP API (REST under /v1, MCP at /mcp) of one
// tenant's memory service, on top of internal/memory. cmd/manager's `serve`
// calls Main; tests, the demo and e2e start it in-process with Start.
package server

import (
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// Deps is what a Server serves.
type Deps struct {
	Store   *memory.Store
	Pool    *pgxpool.Pool
	Schema  string
	Tokens  *Tokens
	Metrics *Metrics
	Logger  *slog.Logger
	Options Options
	// HasLLM says whether the store has an LLM: only then do the LLM-backed
	// routes take a token of the LLM rate limit.
	HasLLM bool
	// Export is what an export's header says about this service (Engram
	// version, embedder, policy); an import reuses the vectors of a file
	// whose embedder equals Export.Embedder.
	Export memory.ExportInfo
	// Limits are the rate limits per credential; nil: built from Options
	// (Start builds them first, to put the LLM limit in front of the model).
	Limits *limits
}

// Server routes and serves the API of one tenant.
type Server struct {
	store   *memory.Store
	pool    *pgxpool.Pool
	schema  string
	tokens  *Tokens
	metrics *Metrics
	logger  *slog.Logger
	opts    Options

	mux    *http.ServeMux
	routes []string
	// operations are the REST routes registered with handleOp, with the
	// contract the adapter enforces (TestQueryParamsMatchOpenAPI reads it).
	operations []route
	// ops are the capabilities REST operations and MCP tools share.
	ops *ops
	// slots bounds the API requests running their handler, readers those
	// reading their body before (nil = unbounded; shedding.go).
	slots, readers chan struct{}
	// imports is the one slot of a request with an import's body (admitImport).
	imports chan struct{}
	// credentialSlots bounds the requests in flight of each credential
	// (nil = unbounded; inflight.go).
	credentialSlots *credentialSlots
	// limits are the token buckets per credential (ratelimit.go).
	limits *limits
	hasLLM bool
	// ready caches the database check of /readyz.
	ready readiness
	// dims keeps the answer about the tenant's vector size (staledims.go).
	dims staleDims
	// draining is set when shutdown starts, so /readyz fails and the
	// endpoint is taken out of the Service while in-flight requests finish.
	draining atomic.Bool
}

// New builds the server and its routes.
func New(d Deps) *Server {
	s := &Server{
		store:   d.Store,
		pool:    d.Pool,
		schema:  d.Schema,
		tokens:  d.Tokens,
		metrics: d.Metrics,
		logger:  d.Logger,
		opts:    d.Options.withDefaults(),
		mux:     http.NewServeMux(),
		limits:  d.Limits,
		hasLLM:  d.HasLLM,
	}
	s.ops = &ops{store: d.Store, metrics: d.Metrics, export: d.Export}
	if s.limits == nil {
		s.limits = newLimits(s.opts, s.metrics)
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.slots, s.readers = newSlots(s.opts.MaxInflight), newSlots(s.opts.MaxInflight)
	s.imports = newSlots(1)
	s.credentialSlots = newCredentialSlots(s.opts.MaxInflightPerCredential)
	s.registerRoutes()
	return s
}

// Routes returns the registered route patterns ("METHOD /path"), sorted.
// The OpenAPI test compares them with the document.
func (s *Server) Routes() []string {
	out := slices.Clone(s.routes)
	slices.Sort(out)
	return out
}

// SetDraining marks the server as shutting down (/readyz answers 503).
func (s *Server) SetDraining() { s.draining.Store(true) }

// handle registers one route.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, pattern)
	s.mux.Handle(pattern, h)
}

// handleAPI registers a route of the authenticated API space that needs a
// credential of role min (and, when it names an owner, one that may act for it).
func (s *Server) handleAPI(pattern string, min auth.Role, h http.HandlerFunc) {
	s.handle(pattern, authorize(min, h))
}

// registerRoutes is the route table; docs/api.md and openapi.yaml list the
// same routes (TestOpenAPIMatchesRoutes keeps them in step, and
// TestQueryParamsMatchOpenAPI their query parameters), and
// docs/security.md the roles. Routes that call the runtime's LLM take
// callsLLM (their own, lower rate limit). /metrics is not here: it has a
// listener of its own (metrics_listener.go).
func (s *Server) registerRoutes() {
	const owner = "/v1/owners/{owner}"
	a := rest{ops: s.ops, tokens: s.tokens, maxImport: s.opts.MaxImportBytes}
	handleOp(s, "POST "+owner+"/memories", auth.RoleAgent, a.addMemory)
	handleOp(s, "POST "+owner+"/memories/batch", auth.RoleAgent, a.addBatch)
	handleOp(s, "POST "+owner+"/extract", auth.RoleAgent, a.extract, callsLLM())
	handleOp(s, "GET "+owner+"/memories", auth.RoleAgent, a.listMemories, withQuery(listParams))
	handleOp(s, "GET "+owner+"/memories/{id}", auth.RoleAgent, a.getMemory, withID(idUUID))
	handleOp(s, "PATCH "+owner+"/memories/{id}", auth.RoleAgent, a.updateMemory, withID(idUUID))
	handleOp(s, "DELETE "+owner+"/memories/{id}", auth.RoleAgent, a.deleteMemory, withID(idUUID), withQuery(deleteParams))
	handleOp(s, "POST "+owner+"/memories/{id}/supersede", auth.RoleAgent, a.supersede, withID(idUUID))
	handleOp(s, "GET "+owner+"/memories/{id}/history", auth.RoleAgent, a.history, withID(idUUID), withQuery(historyParams))
	handleOp(s, "POST "+owner+"/search", auth.RoleAgent, a.search)
	handleOp(s, "POST "+owner+"/context", auth.RoleAgent, a.context)
	handleOp(s, "DELETE "+owner, auth.RoleAdmin, a.eraseOwner)
	handleOp(s, "GET /v1/owners", auth.RoleApp, a.listOwners, withQuery(ownersParams))
	s.registerConversationRoutes(owner, a)
	s.registerLongTermRoutes(owner, a)
	handleOp(s, "POST /v1/tokens", auth.RoleApp, a.mintToken)
	handleOp(s, "GET /v1/stats", auth.RoleAdmin, a.stats, tenantWideRoute()) // tenant-wide counts: not for a token bound to one owner
	s.registerExportRoutes(owner, a)
	// MCP tools check the owner binding per call (the owner is an argument).
	s.handleAPI("POST /mcp", auth.RoleAgent, s.mcpHandler().ServeHTTP)

	s.handle("GET /openapi.json", s.openAPI)
	s.handle("GET /healthz", s.healthz)
	s.handle("GET /readyz", s.readyz)
	s.registerConsole()
}

// registerConversationRoutes is the route table of conversation memory
// (docs/conversation.md). Agents append, read, window, search and expand;
// deleting a session (a hard delete) and compacting on demand (LLM spend)
// need an app or admin token.
func (s *Server) registerConversationRoutes(owner string, a rest) {
	const sess = "/sessions/{id}"
	handleOp(s, "POST "+owner+"/sessions", auth.RoleAgent, a.createSession)
	handleOp(s, "GET "+owner+"/sessions", auth.RoleAgent, a.listSessions, withQuery(sessionListParams))
	handleOp(s, "GET "+owner+sess, auth.RoleAgent, a.getSession, withID(idScope))
	handleOp(s, "PATCH "+owner+sess, auth.RoleAgent, a.updateSession, withID(idScope))
	handleOp(s, "DELETE "+owner+sess, auth.RoleApp, a.deleteSession, withID(idScope))
	handleOp(s, "POST "+owner+sess+"/messages", auth.RoleAgent, a.appendMessages, withID(idScope))
	handleOp(s, "GET "+owner+sess+"/messages", auth.RoleAgent, a.readMessages, withID(idScope), withQuery(messageParams))
	handleOp(s, "POST "+owner+sess+"/window", auth.RoleAgent, a.window, withID(idScope))
	handleOp(s, "POST "+owner+sess+"/compact", auth.RoleApp, a.compactSession, withID(idScope), callsLLM())
	handleOp(s, "GET "+owner+"/summaries/{id}", auth.RoleAgent, a.describeSummary, withID(idUUID))
	handleOp(s, "GET "+owner+"/summaries/{id}/expand", auth.RoleAgent, a.expandSummary, withID(idUUID), withQuery(expandParams))
	handleOp(s, "POST "+owner+"/history/search", auth.RoleAgent, a.searchHistory)
}

// registerLongTermRoutes is the route table of long-term memory. Agents
// extract, end, search episodes, read and write the profile; constraints
// accept only source user (an app or admin token asserting it); the
// tenant-wide (global) memories are listed and deleted by app and admin
// tokens only.
func (s *Server) registerLongTermRoutes(owner string, a rest) {
	const sess = "/sessions/{id}"
	handleOp(s, "POST "+owner+sess+"/extract", auth.RoleAgent, a.extractSession, withID(idScope), optionalBody(), callsLLM())
	handleOp(s, "POST "+owner+sess+"/end", auth.RoleAgent, a.endSession, withID(idScope), optionalBody(), callsLLM())
	handleOp(s, "GET "+owner+sess+"/snapshot", auth.RoleAgent, a.getSnapshot, withID(idScope))
	handleOp(s, "POST "+owner+sess+"/snapshot/advance", auth.RoleAgent, a.advanceSnapshot, withID(idScope), optionalBody())
	handleOp(s, "GET "+owner+"/episodes", auth.RoleAgent, a.searchEpisodes, withQuery(episodeParams))
	handleOp(s, "GET "+owner+"/profile", auth.RoleAgent, a.getDocument(memory.DocProfile), withQuery(documentParams))
	handleOp(s, "PUT "+owner+"/profile", auth.RoleAgent, a.putDocument(memory.DocProfile), withQuery(putDocumentParams))
	handleOp(s, "GET "+owner+"/constraints", auth.RoleAgent, a.getDocument(memory.DocConstraints), withQuery(documentParams))
	handleOp(s, "PUT "+owner+"/constraints", auth.RoleAgent, a.putDocument(memory.DocConstraints), withQuery(putDocumentParams))
	handleOp(s, "GET "+owner+"/changelog", auth.RoleAgent, a.changelog, withQuery(changelogParams))
	handleOp(s, "GET /v1/global/memories", auth.RoleApp, a.listGlobal, withQuery(globalListParams), tenantWideRoute())
	handleOp(s, "DELETE /v1/global/memories/{id}", auth.RoleApp, a.deleteGlobal, withID(idUUID), withQuery(deleteGlobalParams), tenantWideRoute())
}
