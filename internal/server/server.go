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
	// slots bounds the API requests running their handler, readers those
	// reading their body before (nil = unbounded; shedding.go).
	slots, readers chan struct{}
	// credentialSlots bounds the requests in flight of each credential
	// (nil = unbounded; inflight.go).
	credentialSlots *credentialSlots
	// limits are the token buckets per credential (ratelimit.go).
	limits *limits
	hasLLM bool
	// ready caches the database check of /readyz.
	ready readiness
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
	if s.limits == nil {
		s.limits = newLimits(s.opts, s.metrics)
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.slots, s.readers = newSlots(s.opts.MaxInflight), newSlots(s.opts.MaxInflight)
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
// same routes (TestOpenAPIMatchesRoutes keeps them in step), and
// docs/security.md the roles. Routes that call the runtime's LLM are
// wrapped in llmRoute (their own, lower rate limit). /metrics is not here:
// it has a listener of its own (metrics_listener.go).
func (s *Server) registerRoutes() {
	const owner = "/v1/owners/{owner}"
	s.handleAPI("POST "+owner+"/memories", auth.RoleAgent, s.addMemory)
	s.handleAPI("POST "+owner+"/memories/batch", auth.RoleAgent, s.addBatch)
	s.handleAPI("POST "+owner+"/extract", auth.RoleAgent, s.llmRoute(s.extract))
	s.handleAPI("GET "+owner+"/memories", auth.RoleAgent, s.listMemories)
	s.handleAPI("GET "+owner+"/memories/{id}", auth.RoleAgent, s.getMemory)
	s.handleAPI("PATCH "+owner+"/memories/{id}", auth.RoleAgent, s.updateMemory)
	s.handleAPI("DELETE "+owner+"/memories/{id}", auth.RoleAgent, s.deleteMemory)
	s.handleAPI("POST "+owner+"/memories/{id}/supersede", auth.RoleAgent, s.supersede)
	s.handleAPI("GET "+owner+"/memories/{id}/history", auth.RoleAgent, s.history)
	s.handleAPI("POST "+owner+"/search", auth.RoleAgent, s.search)
	s.handleAPI("POST "+owner+"/context", auth.RoleAgent, s.context)
	s.handleAPI("DELETE "+owner, auth.RoleAdmin, s.eraseOwner)
	s.handleAPI("GET /v1/owners", auth.RoleApp, s.listOwners)
	s.registerConversationRoutes(owner)
	s.registerLongTermRoutes(owner)
	s.handleAPI("POST /v1/tokens", auth.RoleApp, s.mintToken)
	s.handleAPI("GET /v1/stats", auth.RoleAdmin, unbound(s.stats)) // tenant-wide counts: not for a token bound to one owner
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
func (s *Server) registerConversationRoutes(owner string) {
	const sess = "/sessions/{id}"
	s.handleAPI("POST "+owner+"/sessions", auth.RoleAgent, s.createSession)
	s.handleAPI("GET "+owner+"/sessions", auth.RoleAgent, s.listSessions)
	s.handleAPI("GET "+owner+sess, auth.RoleAgent, s.getSession)
	s.handleAPI("PATCH "+owner+sess, auth.RoleAgent, s.updateSession)
	s.handleAPI("DELETE "+owner+sess, auth.RoleApp, s.deleteSession)
	s.handleAPI("POST "+owner+sess+"/messages", auth.RoleAgent, s.appendMessages)
	s.handleAPI("GET "+owner+sess+"/messages", auth.RoleAgent, s.readMessages)
	s.handleAPI("POST "+owner+sess+"/window", auth.RoleAgent, s.window)
	s.handleAPI("POST "+owner+sess+"/compact", auth.RoleApp, s.llmRoute(s.compactSession))
	s.handleAPI("GET "+owner+"/summaries/{id}", auth.RoleAgent, s.describeSummary)
	s.handleAPI("GET "+owner+"/summaries/{id}/expand", auth.RoleAgent, s.expandSummary)
	s.handleAPI("POST "+owner+"/history/search", auth.RoleAgent, s.searchHistory)
}
