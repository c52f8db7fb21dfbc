package server

import (
	"io"
	"net/http"
)

// A streamed answer (GET /v1/export, GET /v1/owners/{owner}/export) is
// written while it is read from the database, page by page, so the
// service holds one page whatever the size of what it sends. The
// operation still returns a reply (the adapter's contract); its stream
// writes the body. An error before the first byte is answered as every
// error is (problem+json); after it, the status is sent already, so the
// connection is aborted: the client sees a cut body (and no trailer line),
// never an answer that looks complete.

// stream is a body written by write, with its content type.
type stream struct {
	contentType string
	write       func(w io.Writer, flush func() error) error
}

func streamed(contentType string, write func(w io.Writer, flush func() error) error) reply {
	return reply{status: http.StatusOK, stream: &stream{contentType: contentType, write: write}}
}

// startWriter sends the status and content type on the first write.
type startWriter struct {
	w       http.ResponseWriter
	ct      string
	started bool
}

func (sw *startWriter) Write(b []byte) (int, error) {
	if !sw.started {
		sw.started = true
		sw.w.Header().Set("Content-Type", sw.ct)
		sw.w.Header().Set("Cache-Control", "no-store")
		sw.w.WriteHeader(http.StatusOK)
	}
	return sw.w.Write(b)
}

func (sw *startWriter) flush() error {
	if !sw.started {
		return nil
	}
	return http.NewResponseController(sw.w).Flush()
}

// serveStream writes st's body, or its error.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, st *stream) {
	sw := &startWriter{w: w, ct: st.contentType}
	err := st.write(sw, sw.flush)
	if err == nil {
		return
	}
	if !sw.started {
		s.fail(w, r, err)
		return
	}
	s.logger.Warn("a streamed answer ended early", "route", r.Pattern, "request_id", w.Header().Get(headerRequestID), "error", err)
	panic(http.ErrAbortHandler) // the server closes the connection: the client sees the body cut
}
