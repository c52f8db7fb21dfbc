package server

import (
	"bytes"
	"net/http"
)

// A JSON-RPC batch carries many calls in one HTTP request (MCP protocol
// versions before 2025-06-18 allow them, and the SDK accepts them). Each
// tool's answer is bounded by the runtime's byte cap, but a batch's HTTP
// answer is all of them, built in memory: 150 get_window calls answered
// 85 MB. So /mcp takes one JSON-RPC message a request, and a batch is
// refused whole before any call runs (docs/mcp.md): every client sends
// single messages in 2025-06-18 and later, which dropped batches.

// oneMessagePerRequest answers 400 to an MCP POST whose body is not one
// JSON-RPC message: batch-not-supported for an array, malformed-request
// for anything else that is not an object. An empty body goes on to the
// SDK, which refuses it. The body was read by readBodyFirst, which
// answered 413 to a Content-Length over --max-body-bytes; a chunked body
// over it was read one byte past the limit, and the SDK refuses it with 413.
func oneMessagePerRequest(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := notOneMessage(r); p != nil {
			writeProblem(w, r, p)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func notOneMessage(r *http.Request) *Problem {
	b, ok := r.Body.(*bufferedBody)
	if !ok {
		return nil
	}
	data := bytes.TrimLeft(b.data, " \t\r\n") // JSON's whitespace
	switch {
	case len(data) == 0 || data[0] == '{':
		return nil
	case data[0] == '[':
		return newProblem(probBatch, "JSON-RPC batches are not accepted: send one JSON-RPC message a request "+
			"(MCP 2025-06-18 and later have no batches; each answer is bounded by the runtime's byte cap, a batch's would not be)")
	default:
		return newProblem(probMalformed, "the body must be one JSON-RPC message, a JSON object")
	}
}
