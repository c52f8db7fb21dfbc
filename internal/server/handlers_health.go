package server

import (
	"net/http"
	"time"
)

// readyTimeout bounds the database checks of /readyz, so a hung database
// fails the probe instead of piling up probe requests.
const readyTimeout = 2 * time.Second

// healthz: the process is alive and serving HTTP. It never touches the
// database: a database outage must not make the kubelet restart every pod.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, statusResponse{Status: "ok"})
}

// readyz: ready when not shutting down and the database check passes
// (checkReady; its outcome is cached for readyCacheTTL).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeProblem(w, r, newProblem(probUnavailable, "the server is shutting down"))
		return
	}
	st, p, cause := s.ready.check(s.checkReady)
	if p != nil {
		if cause != nil {
			setCause(w, cause)
		}
		// A copy: writeProblem sets the request's instance and id on it.
		cp := *p
		writeProblem(w, r, &cp)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
