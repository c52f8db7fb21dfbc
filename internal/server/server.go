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
	// slots bounds the API requests in flight (nil = unbounded).
	slots chan struct{}
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
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.opts.MaxInflight > 0 {
		s.slots = make(chan struct{}, s.opts.MaxInflight)
	}
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

// registerRoutes is the route table; docs/api.md and openapi.yaml list the
// same routes (TestOpenAPIMatchesRoutes keeps them in step).
func (s *Server) registerRoutes() {
	const owner = "/v1/owners/{owner}"
	s.handle("POST "+owner+"/memories", s.addMemory)
	s.handle("POST "+owner+"/memories/batch", s.addBatch)
	s.handle("POST "+owner+"/extract", s.extract)
	s.handle("GET "+owner+"/memories", s.listMemories)
	s.handle("GET "+owner+"/memories/{id}", s.getMemory)
	s.handle("PATCH "+owner+"/memories/{id}", s.updateMemory)
	s.handle("DELETE "+owner+"/memories/{id}", s.deleteMemory)
	s.handle("POST "+owner+"/memories/{id}/supersede", s.supersede)
	s.handle("GET "+owner+"/memories/{id}/history", s.history)
	s.handle("POST "+owner+"/search", s.search)
	s.handle("POST "+owner+"/context", s.context)
	s.handle("DELETE "+owner, s.eraseOwner)

	s.handle("GET /openapi.json", s.openAPI)
	s.handle("GET /healthz", s.healthz)
	s.handle("GET /readyz", s.readyz)
	s.handle("GET /metrics", s.metricsHandler().ServeHTTP)
	s.handle("POST /mcp", s.mcpHandler().ServeHTTP)
}
