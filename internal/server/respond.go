package server

import (
	"encoding/json"
	"net/http"

	"github.com/engram-dev/engram/internal/memory"
)

// writeJSON answers with v as application/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		setCause(w, err)
		http.Error(w, "encoding the response failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// fail answers with the problem for an engine error.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.metrics.countRefusal(err)
	p, internal := problemFor(err)
	if internal {
		setCause(w, err)
	}
	writeProblem(w, r, p)
}

// uuidField checks that v is a UUID in its canonical text form, so a
// malformed id is a 422 naming the field and never reaches SQL.
func uuidField(field, v string) *memory.FieldError {
	if memory.ValidID(v) {
		return nil
	}
	fe := fieldErr(field, "must be a UUID such as 0b6c2f1e-8d1a-4c3e-9f57-2a9d0c4b7e11")
	return &fe
}
