package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/engram-dev/engram/internal/auth"
)

// Request bodies are read whole, under --body-timeout, after the request's
// credential is admitted and before the request takes one of the
// service's --max-inflight slots: a client that trickles its body holds a
// slot of its own credential (inflight.go) and one of the readers', never
// one the handlers need, and for at most the body timeout. Readers are
// bounded like handlers (--max-inflight), so bodies waiting for a handler
// hold at most --max-inflight × --max-body-bytes of memory.

// writeMargin is what the write deadline leaves, past the body timeout and
// the request timeout, to send the answer to a client that reads it.
const writeMargin = 10 * time.Second

// writeTimeout is the http.Server's WriteTimeout: from the end of the
// request's headers to the end of its answer. A client that does not read
// its answer holds its handler (and the answer's memory) until then, no
// longer. Without a request timeout there is no write deadline either.
func (o Options) writeTimeout() time.Duration {
	if o.RequestTimeout <= 0 {
		return 0
	}
	return o.BodyTimeout + o.RequestTimeout + writeMargin
}

// bufferedBody is a request body read before the handler ran.
type bufferedBody struct {
	*bytes.Reader
	data []byte
}

func (*bufferedBody) Close() error { return nil }

// readBodyFirst reads r's body into memory under the body deadline and
// returns the request the handler gets. A body whose Content-Length is over
// --max-body-bytes is refused here with 413, unread, before any handler
// slot is taken: on /mcp the SDK would read it inside the handler, holding
// a slot until the server's ReadTimeout (60 s) instead of the body timeout
// (issue 26's re-review). A body without a length (chunked) over the limit
// is read one byte past it, so the handler answers 413 as it always did.
func (s *Server) readBodyFirst(w http.ResponseWriter, r *http.Request) (*http.Request, *Problem) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r, nil
	}
	limit := s.bodyLimit(r)
	if r.ContentLength > limit {
		return r, tooLarge(limit) // answered by refuseUnread: the connection is closed
	}
	if !s.takeReader() {
		return r, s.shedProblem()
	}
	defer s.releaseReader()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) // ErrNotSupported only off a real connection (tests)
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	// Past the body, the connection's reads only watch for the client
	// going away while the handler runs: the deadline must not cut that.
	_ = rc.SetReadDeadline(s.requestEnd())
	if isTimeout(err) {
		return r, newProblem(probMalformed, fmt.Sprintf("the request body did not arrive within %s (--body-timeout)", s.opts.BodyTimeout))
	}
	if err != nil {
		return r, newProblem(probMalformed, "reading the request body failed")
	}
	r2 := *r
	r2.Body = &bufferedBody{Reader: bytes.NewReader(data), data: data}
	return &r2, nil
}

// bodyLimit is the largest body of r: --max-body-bytes, or
// --max-import-bytes for an import (an export file) by a credential that
// may import. The body is read before the route's role check, so the
// credential decides here: an agent's or an app's upload to the import
// path is held to --max-body-bytes like any other body (issue 26's
// fifteenth review, HIGH 1: eight agent uploads of 24 MiB held 222 MiB).
func (s *Server) bodyLimit(r *http.Request) int64 {
	if isImport(r) && mayImport(credential(r)) {
		return s.opts.MaxImportBytes
	}
	return s.opts.MaxBodyBytes
}

func isImport(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == importPath
}

// mayImport: the import route's credential, an admin not bound to an owner.
func mayImport(c auth.Credential) bool {
	return c.Role == auth.RoleAdmin && c.Owner == ""
}

// admitImport takes the one import slot for a request whose body may be
// --max-import-bytes: an import holds its body and its decoded records
// until it ends, so imports run one at a time (a second is refused with
// the overloaded problem, as a service out of slots refuses). release gives the
// slot back; it is a no-op for every other request.
func (s *Server) admitImport(r *http.Request) (release func(), p *Problem) {
	if s.bodyLimit(r) <= s.opts.MaxBodyBytes {
		return func() {}, nil
	}
	if !tryTake(s.imports) {
		s.metrics.shed.Inc()
		return nil, newProblem(probOverloaded, "an import is running already: imports run one at a time; retry when it has finished")
	}
	return func() { give(s.imports) }, nil
}

// requestEnd is the read deadline of a request whose body is read: the
// write deadline's end, or none without a request timeout.
func (s *Server) requestEnd() time.Time {
	if d := s.opts.writeTimeout(); d > 0 {
		return time.Now().Add(d)
	}
	return time.Time{}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// refuseUnread answers p to a request whose body was not read (whole). On
// HTTP/1 the connection is closed after the answer: otherwise net/http
// would wait for the rest of the body before sending it, and a trickling
// client would keep the answer, and the connection, for as long as it
// likes.
func refuseUnread(w http.ResponseWriter, r *http.Request, p *Problem) {
	if r.ProtoMajor == 1 && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		if _, read := r.Body.(*bufferedBody); !read {
			w.Header().Set("Connection", "close")
		}
	}
	writeProblem(w, r, p)
}
