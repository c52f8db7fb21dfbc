package server

import (
	"context"
	"net/http"

	"github.com/engram-dev/engram/internal/memory"
)

// The explorer of the summary DAG and the history search
// (docs/conversation.md). A summary id of another owner answers 404
// exactly like a missing one.

// describeSummary: GET /v1/owners/{owner}/summaries/{id}: the summary, its
// children and, for a leaf, the range of messages it covers.
func (s *Server) describeSummary(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := idParam(w, r)
	if !ok {
		return
	}
	d, err := s.store.DescribeSummary(r.Context(), r.PathValue("owner"), id)
	if err != nil {
		s.fail(w, r, inResource(err, resSummary))
		return
	}
	d.Children = nonNil(d.Children)
	writeJSON(w, http.StatusOK, d)
}

// expandParams are the query parameters of expand.
var expandParams = []string{"maxTokens"}

// expandSummary: GET /v1/owners/{owner}/summaries/{id}/expand?maxTokens=:
// the original messages the summary covers, byte for byte, oldest first,
// up to maxTokens (0 = the engine's default of 20,000) and the byte cap;
// truncated and the omitted range say when more exist.
func (s *Server) expandSummary(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r)
	if !ok {
		return
	}
	q := newQuery(r.URL, expandParams...)
	maxTokens := q.integer("maxTokens")
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	exp, err := s.store.ExpandSummary(r.Context(), memory.ExpandRequest{Owner: r.PathValue("owner"), ID: id, MaxTokens: maxTokens})
	if err != nil {
		s.fail(w, r, inResource(err, resSummary))
		return
	}
	exp.Messages = nonNil(exp.Messages)
	writeJSON(w, http.StatusOK, exp)
}

// searchHistory: POST /v1/owners/{owner}/history/search: messages and
// summaries of the owner (or of one session), best first.
func (s *Server) searchHistory(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	var b historySearchBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	res, err := s.searchHistoryOf(r.Context(), memory.HistorySearchRequest{
		Owner: r.PathValue("owner"), Query: b.Query, SessionID: b.SessionID, Limit: b.Limit,
	})
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	res.Results = nonNil(res.Results)
	writeJSON(w, http.StatusOK, res)
}

// searchHistoryOf searches; a sessionId the owner does not have is
// ErrNotFound, like every other route that names a session (the engine
// would find nothing in it, which would not tell a typo from a quiet session).
func (s *Server) searchHistoryOf(ctx context.Context, req memory.HistorySearchRequest) (*memory.HistorySearchResult, error) {
	if req.SessionID != "" && memory.ValidScopeID(req.SessionID) {
		if _, err := s.store.GetSession(ctx, req.Owner, req.SessionID); err != nil {
			return nil, err
		}
	}
	return s.store.SearchHistory(ctx, req)
}
