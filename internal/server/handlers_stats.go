package server

import "net/http"

// stats: GET /v1/stats, admin tokens only. Tenant-wide counts of memories
// and owners for operators (`kubectl engram status`); an admin may already
// read every owner, so the counts reveal nothing new to it.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	st, err := s.store.Stats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
