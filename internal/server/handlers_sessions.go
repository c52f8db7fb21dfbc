package server

import (
	"net/http"
	"net/url"

	"github.com/engram-dev/engram/internal/memory"
)

// Conversation sessions: the message log of one conversation of an owner
// (docs/conversation.md). Every route is owner-scoped like the memories;
// a session id of another owner answers 404 exactly like a missing one.

// createSession: POST /v1/owners/{owner}/sessions. 201 with Location.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	var b createSessionBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	sess, err := s.store.CreateSession(r.Context(), memory.CreateSessionRequest{
		Owner: r.PathValue("owner"), ID: b.ID, Agent: b.Agent, Title: b.Title,
	})
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	w.Header().Set("Location", sessionPath(sess.Owner, sess.ID))
	writeJSON(w, http.StatusCreated, sess)
}

func sessionPath(owner, id string) string {
	return "/v1/owners/" + url.PathEscape(owner) + "/sessions/" + url.PathEscape(id)
}

// sessionListParams are the query parameters of the session list
// (TestConversationParamsDocumented keeps openapi.yaml in step).
var sessionListParams = []string{"agent", "archived", "limit", "cursor"}

// listSessions: GET /v1/owners/{owner}/sessions, most recently active first.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL, sessionListParams...)
	req := memory.ListSessionsRequest{
		Owner:    r.PathValue("owner"),
		Agent:    q.str("agent"),
		Archived: q.optBoolean("archived"),
		Limit:    q.integer("limit"),
		Cursor:   q.str("cursor"),
	}
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	page, err := s.store.ListSessions(r.Context(), req)
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	page.Sessions = nonNil(page.Sessions)
	writeJSON(w, http.StatusOK, page)
}

// getSession: GET /v1/owners/{owner}/sessions/{id}.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	sess, err := s.store.GetSession(r.Context(), r.PathValue("owner"), id)
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// updateSession: PATCH /v1/owners/{owner}/sessions/{id} {title, archived}.
func (s *Server) updateSession(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	var b updateSessionBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	sess, err := s.store.UpdateSession(r.Context(), memory.UpdateSessionRequest{
		Owner: r.PathValue("owner"), ID: id, Title: b.Title, Archived: b.Archived,
	})
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// deleteSession: DELETE /v1/owners/{owner}/sessions/{id}, app and admin
// tokens. A hard delete of the session with its messages and summaries:
// unlike a memory's soft delete nothing can be restored, so agents may
// archive a session (PATCH) but not delete it (docs/conversation.md).
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	if err := s.store.DeleteSession(r.Context(), r.PathValue("owner"), id); err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// appendMessages: POST /v1/owners/{owner}/sessions/{id}/messages. One turn
// (1..N messages) is stored atomically with gap-free seq numbers; the
// redaction and injection guard of memory writes run on every message, and
// a refused message is a 422 that stores nothing of the turn.
func (s *Server) appendMessages(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	var b appendBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	src, p := writeSource(credential(r), b.Source, "source")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	res, err := s.store.AppendTurn(r.Context(), b.request(r.PathValue("owner"), id, src))
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	res.Messages = nonNil(res.Messages)
	writeJSON(w, http.StatusCreated, res)
}

// messageParams are the query parameters of the message read.
var messageParams = []string{"from", "to", "last"}

// readMessages: GET /v1/owners/{owner}/sessions/{id}/messages?from=&to=
// (seq range [from,to), either end open) or ?last=N.
func (s *Server) readMessages(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	q := newQuery(r.URL, messageParams...)
	req := memory.MessagesRequest{
		Owner: r.PathValue("owner"), SessionID: id,
		From: q.integer64("from"), To: q.integer64("to"), Last: q.integer("last"),
	}
	if q.values.Has("last") && (q.values.Has("from") || q.values.Has("to")) {
		q.errs = append(q.errs, fieldErr("last", "send either last or a from/to range, not both"))
	}
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	page, err := s.store.Messages(r.Context(), req)
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	page.Items = nonNil(page.Items)
	writeJSON(w, http.StatusOK, page)
}

// window: POST /v1/owners/{owner}/sessions/{id}/window.
func (s *Server) window(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	var b windowBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	win, err := s.store.Window(r.Context(), memory.WindowRequest{
		Owner: r.PathValue("owner"), SessionID: id,
		Strategy: b.Strategy, Budget: b.Budget, FreshTail: b.FreshTail, Last: b.Last,
	})
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	win.Items = nonNil(win.Items)
	writeJSON(w, http.StatusOK, win)
}

// compactSession: POST /v1/owners/{owner}/sessions/{id}/compact, app and
// admin tokens (it spends the runtime's LLM budget; the summarize job
// compacts every session over the threshold anyway).
func (s *Server) compactSession(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	var b compactBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	res, err := s.store.CompactSession(r.Context(), memory.CompactSessionRequest{
		Owner: r.PathValue("owner"), SessionID: id, Mode: b.Mode, Force: b.Force,
	})
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	res.Roots = nonNil(res.Roots)
	writeJSON(w, http.StatusOK, res)
}

// sessionParam reads the {id} path value of a session route; ok is false
// when a problem was written. Session ids are scope ids (like the session
// of a memory), so a malformed one is a 422 and never reaches SQL.
func sessionParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !memory.ValidScopeID(id) {
		writeProblem(w, r, validationProblem(fieldErr("id", scopeIDMessage)))
		return "", false
	}
	return id, true
}

// scopeIDMessage is what a malformed owner, agent or session id is told.
const scopeIDMessage = "must be 1-256 characters of letters, digits and . _ : @ + -, starting with a letter or digit"
