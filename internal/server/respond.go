package server

import (
	"encoding/json"
	"net/http"

	"github.com/engram-dev/engram/internal/memory"
)

// jsonAppender is an answer that writes its own JSON, byte for byte what
// encoding/json would write (memory.SearchResult, on every search, and
// memory.Window; issue 32); false: a value encoding/json refuses, which writeJSON then reports
// through encoding/json.
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, bool)
}

// answerBufBytes is the first buffer of an answer a jsonAppender writes: a
// search of ten short memories fits.
const answerBufBytes = 8 << 10

// writeJSON answers with v as application/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var body []byte
	if a, isAppender := v.(jsonAppender); isAppender {
		if b, ok := a.AppendJSON(make([]byte, 0, answerBufBytes)); ok {
			body = b
		}
	}
	if body == nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			setCause(w, err)
			http.Error(w, "encoding the response failed", http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// fail answers with the problem for an engine error.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	err = s.staleDimensions(r.Context(), err)
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
