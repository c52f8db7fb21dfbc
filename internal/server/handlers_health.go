package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/engram-dev/engram/internal/tenant"
)

// readyTimeout bounds the database checks of /readyz, so a hung database
// fails the probe instead of piling up probe requests.
const readyTimeout = 2 * time.Second

// healthz: the process is alive and serving HTTP. It never touches the
// database: a database outage must not make the kubelet restart every pod.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, statusResponse{Status: "ok"})
}

// readyz: the database answers as the tenant role and the schema is at this
// binary's version (a new image waits for the operator's migration).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeProblem(w, r, newProblem(probUnavailable, "the server is shutting down"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		setCause(w, err)
		writeProblem(w, r, newProblem(probUnavailable, "the database cannot be reached"))
		return
	}
	st, err := tenant.Status(ctx, s.pool, s.schema)
	if err != nil {
		setCause(w, err)
		writeProblem(w, r, newProblem(probUnavailable, "the schema version cannot be read"))
		return
	}
	if !st.UpToDate() {
		writeProblem(w, r, newProblem(probUnavailable,
			"the schema is at version "+strconv.Itoa(st.Current)+", this binary needs "+strconv.Itoa(st.Latest)+"; the operator migrates it"))
		return
	}
	writeJSON(w, http.StatusOK, statusResponse{Status: "ready", SchemaVersion: st.Current, LatestSchemaVersion: st.Latest})
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{ErrorLog: nil})
}
