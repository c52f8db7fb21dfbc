package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"time"
)

const headerRequestID = "X-Request-Id"

// Handler returns the root handler: request id, metrics and access log,
// panic recovery, then for the API (/v1 and /mcp) authentication, the rate
// limit of the credential and load shedding, then routing. Probes and
// /openapi.json are open and never shed, so a busy server still answers its
// kubelet; /metrics is on a listener of its own (metrics_listener.go).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveRoot)
}

func (s *Server) serveRoot(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &responseWriter{ResponseWriter: w}
	rw.Header().Set(headerRequestID, requestID(r))
	if s.draining.Load() {
		// Shutting down: the client's next request goes on a new connection,
		// which the Service sends to a pod that stays. A kept-alive
		// connection would keep reaching this one until Shutdown closes it
		// as idle, and a request sent on it at that moment fails (EOF)
		// without an answer; net/http retries no POST.
		rw.Header().Set("Connection", "close")
	}
	route := s.routeOf(r)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as the net/http docs do
				panic(v)
			}
			s.logger.Error("panic serving a request", "route", route, "request_id", rw.Header().Get(headerRequestID),
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !rw.wroteHeader {
				writeProblem(rw, r, newProblem(probInternal, "an unexpected error occurred; the server log has details"))
			}
		}
		s.finish(rw, r, route, start)
	}()
	s.serveAPI(rw, r, route)
}

// serveAPI applies auth and shedding to the API space, then routes.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, route string) {
	if isAPIPath(r.URL.Path) {
		var p *Problem
		if r, p = s.authenticate(r); p != nil {
			writeProblem(w, r, p)
			return
		}
		var release func()
		if r, release, p = s.admitAPI(w, r); p != nil {
			refuseUnread(w, r, p)
			return
		}
		defer release()
		s.metrics.inflight.Inc()
		defer s.metrics.inflight.Dec()
		if s.opts.RequestTimeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
	}
	if p := s.unroutable(r, route); p != nil {
		writeProblem(w, r, p)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// admitAPI admits an authenticated API request in the order that keeps a
// slow or greedy client from holding what the others need: the
// credential's rate limit, a slot of the credential (inflight.go), its body
// read under --body-timeout (requestbody.go), and last a slot of the
// service. It returns the refusal of the first that refuses (answered
// with refuseUnread), or release, which gives back the slots taken.
func (s *Server) admitAPI(w http.ResponseWriter, r *http.Request) (*http.Request, func(), *Problem) {
	if p := s.limits.admit(credential(r)); p != nil {
		return r, nil, p
	}
	releaseCredential, p := s.admitInflight(r)
	if p != nil {
		return r, nil, p
	}
	releaseImport, p := s.admitImport(r)
	if p != nil {
		releaseCredential()
		return r, nil, p
	}
	r, p = s.readBodyFirst(w, r)
	if p == nil && !tryTake(s.slots) {
		p = s.shedProblem()
	}
	if p != nil {
		releaseImport()
		releaseCredential()
		return r, nil, p
	}
	return r, func() { give(s.slots); releaseImport(); releaseCredential() }, nil
}

// routeLabel for requests that match no route (bounded metric cardinality).
const routeUnmatched = "unmatched"

// routeOf returns the pattern the request matches, or routeUnmatched.
func (s *Server) routeOf(r *http.Request) string {
	if !isCanonical(r.URL.EscapedPath()) {
		return routeUnmatched
	}
	if _, pattern := s.mux.Handler(r); pattern != "" {
		return pattern
	}
	return routeUnmatched
}

// unroutable explains why a request matches no route: an empty owner, a
// path that is not canonical (ServeMux would answer with a redirect, which
// an API client should never have to follow), a wrong method or an unknown path.
func (s *Server) unroutable(r *http.Request, route string) *Problem {
	p := r.URL.Path
	if p == "/v1/owners/" || strings.HasPrefix(p, "/v1/owners//") {
		return validationProblem(fieldErr("owner", "required: the path must name an owner, /v1/owners/{owner}/..."))
	}
	if route != routeUnmatched {
		return nil
	}
	if !isCanonical(r.URL.EscapedPath()) {
		return newProblem(probNoRoute, "no route matches "+r.Method+" "+p+": the path has an empty, . or .. segment; send it without (routes are in /openapi.json)")
	}
	if allow := s.allowedMethods(r); len(allow) > 0 {
		prob := newProblem(probMethod, "this route accepts "+strings.Join(allow, ", "))
		return prob.withAllow(allow)
	}
	return newProblem(probNoRoute, "no route matches "+r.Method+" "+p+"; see /openapi.json")
}

// allowedMethods lists the methods that have a route for r's path.
func (s *Server) allowedMethods(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	return allow
}

func isAPIPath(p string) bool {
	return p == "/v1" || strings.HasPrefix(p, "/v1/") || p == "/mcp" || strings.HasPrefix(p, "/mcp/")
}

// isCanonical reports whether the escaped path p has no empty, "." or ".."
// segments (ServeMux matches escaped paths: "..%2F" inside a segment is data).
func isCanonical(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p)
	return clean == p || clean+"/" == p
}

// finish records metrics and writes the access log line. Owner ids, memory
// content and tokens are never logged: the route pattern stands for the path.
func (s *Server) finish(rw *responseWriter, r *http.Request, route string, start time.Time) {
	if !rw.wroteHeader {
		rw.status = http.StatusOK
	}
	d := time.Since(start)
	s.metrics.observeRequest(route, r.Method, rw.status, d)
	level := slog.LevelInfo
	switch {
	case rw.status == http.StatusServiceUnavailable:
		level = slog.LevelWarn // expected while the database is down; no bug to chase
	case rw.status >= 500:
		level = slog.LevelError
	case route == "GET /healthz" || route == "GET /readyz":
		level = slog.LevelDebug // probes would drown the log
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", rw.status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.Int64("bytes", rw.bytes),
		slog.String("request_id", rw.Header().Get(headerRequestID)),
	}
	if rw.cause != nil {
		attrs = append(attrs, slog.String("error", rw.cause.Error()))
	}
	s.logger.LogAttrs(r.Context(), level, "request", attrs...)
}

// requestID keeps a sane incoming X-Request-Id (from a proxy) or makes one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(headerRequestID); id != "" && len(id) <= 64 && isPrintableASCII(id) {
		return id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// responseWriter records the status and size of a response, and the error
// behind a 5xx for the access log.
type responseWriter struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	cause       error
}

func (w *responseWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush lets streaming responses (MCP) through.
func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setCause records the error behind a failed request for the access log.
func setCause(w http.ResponseWriter, err error) {
	for {
		switch x := w.(type) {
		case *responseWriter:
			x.cause = err
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

func (p *Problem) withAllow(allow []string) *Problem {
	p.allow = strings.Join(allow, ", ")
	return p
}
