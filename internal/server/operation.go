package server

import (
	"context"
	"net/http"
	"reflect"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// A REST operation is a function of the request and its decoded body to a
// reply or an error: it never writes the response. The adapter
// (serveOperation) does what every route does, the same way on every
// route: it enforces the route's query contract (declared parameters
// only), checks the {id} of the path, decodes the body strictly, calls the
// operation and writes either its reply or the one problem+json mapping of
// its error (problemFor). Errors are typed: a problem the service decides
// itself travels as a problemError, engine errors as the engine's types.
type operation[B any] func(c *call, body *B) (reply, error)

// call is what an operation gets besides its body: the request, and its
// query already checked against the route's declared parameters (the
// operation reads the values; invalid ones are collected by q).
type call struct {
	r *http.Request
	q *query
}

func (c *call) ctx() context.Context        { return c.r.Context() }
func (c *call) owner() string               { return c.r.PathValue("owner") }
func (c *call) id() string                  { return c.r.PathValue("id") }
func (c *call) credential() auth.Credential { return credential(c.r) }

// reply is a successful answer: a status, the JSON value (nil: no body, as
// for 204) and the Location of what a 201 created.
type reply struct {
	status   int
	value    any
	location string
	// stream, when set, writes the answer itself as it reads it
	// (streaming.go): the one variant of the adapter, for exports.
	stream *stream
}

func ok(v any) reply { return reply{status: http.StatusOK, value: v} }
func created(v any, location string) reply {
	return reply{status: http.StatusCreated, value: v, location: location}
}
func noContent() reply { return reply{status: http.StatusNoContent} }

// noBody is the body type of operations that take none: the adapter does
// not read the body of their requests.
type noBody struct{}

// pathID says how the {id} of a route's path is checked before the
// operation runs, so a malformed id is a 422 naming it and never reaches SQL.
type pathID int

const (
	idNone  pathID = iota
	idUUID         // memories, summaries, global memories
	idScope        // sessions: an owner, agent or session id
)

// route is the registration of one operation: its pattern, the role it
// needs and the contract the adapter enforces.
type route struct {
	pattern string
	role    auth.Role
	// query lists the parameters the route takes (with their descriptions,
	// which openapi.yaml repeats: TestQueryParamsMatchOpenAPI).
	query params
	// body is the type the body is decoded into (nil: the route reads no
	// body); TestBodyFieldsMatchOpenAPI compares its JSON fields with the
	// document's request schema.
	body reflect.Type
	id   pathID
	// optionalBody: an empty body is the empty object (POSTs whose input
	// is all optional).
	optionalBody bool
	// llm: the route calls the runtime's LLM and takes a token of its own,
	// lower rate limit (llmRoute).
	llm bool
	// tenantWide: the route is about the whole tenant, so a credential
	// bound to one owner is refused (unbound).
	tenantWide bool
	// rawBody is the media type of a body the operation reads itself
	// (an import's JSON Lines), not decoded by the adapter.
	rawBody string
}

// routeOption sets one part of a route's contract in the route table.
type routeOption func(*route)

func withQuery(p params) routeOption { return func(r *route) { r.query = p } }
func withID(id pathID) routeOption   { return func(r *route) { r.id = id } }
func optionalBody() routeOption      { return func(r *route) { r.optionalBody = true } }
func callsLLM() routeOption          { return func(r *route) { r.llm = true } }
func tenantWideRoute() routeOption   { return func(r *route) { r.tenantWide = true } }
func withRawBody(mediaType string) routeOption {
	return func(r *route) { r.rawBody = mediaType }
}

// handleOp registers op under pattern for credentials of role min and up.
func handleOp[B any](s *Server, pattern string, min auth.Role, op operation[B], opts ...routeOption) {
	rt := route{pattern: pattern, role: min}
	if _, none := any(new(B)).(*noBody); !none {
		rt.body = reflect.TypeFor[B]()
	}
	for _, o := range opts {
		o(&rt)
	}
	h := func(w http.ResponseWriter, r *http.Request) { serveOperation(s, w, r, &rt, op) }
	if rt.tenantWide {
		h = unbound(h)
	}
	if rt.llm {
		h = s.llmRoute(h)
	}
	s.operations = append(s.operations, rt)
	s.handleAPI(pattern, min, h)
}

// serveOperation is the adapter: contract, call, and one way to answer.
func serveOperation[B any](s *Server, w http.ResponseWriter, r *http.Request, rt *route, op operation[B]) {
	rep, err := runOperation(s, w, r, rt, op)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rep.stream != nil {
		s.serveStream(w, r, rep.stream)
		return
	}
	if rep.location != "" {
		w.Header().Set("Location", rep.location)
	}
	if rep.value == nil {
		w.WriteHeader(rep.status)
		return
	}
	writeJSON(w, rep.status, rep.value)
}

func runOperation[B any](s *Server, w http.ResponseWriter, r *http.Request, rt *route, op operation[B]) (reply, error) {
	q := newQuery(r.URL, rt.query.names()...)
	if err := q.err(); err != nil {
		return reply{}, err
	}
	if err := rt.checkID(r.PathValue("id")); err != nil {
		return reply{}, err
	}
	var body B
	if rt.body != nil {
		if p := s.decodeBody(w, r, &body, rt.optionalBody); p != nil {
			return reply{}, problemError{p}
		}
	}
	return op(&call{r: r, q: q}, &body)
}

// checkID checks the {id} of the path as the route declares.
func (rt *route) checkID(id string) error {
	switch rt.id {
	case idUUID:
		if fe := uuidField("id", id); fe != nil {
			return problemError{validationProblem(*fe)}
		}
	case idScope:
		if !memory.ValidScopeID(id) {
			return problemError{validationProblem(fieldErr("id", scopeIDMessage))}
		}
	}
	return nil
}
