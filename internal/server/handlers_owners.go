package server

import (
	"net/http"

	"github.com/engram-dev/engram/internal/memory"
)

// ownersParams are the query parameters of GET /v1/owners.
var ownersParams = []string{"limit", "cursor"}

// listOwners: GET /v1/owners, app and admin tokens (agent tokens are bound
// to one owner and have nothing to discover). A token bound to an owner
// sees that owner only.
func (s *Server) listOwners(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL, ownersParams...)
	req := memory.OwnersRequest{Limit: q.integer("limit"), Cursor: q.str("cursor"), Only: credential(r).Owner}
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	page, err := s.store.Owners(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page.Items = nonNil(page.Items)
	writeJSON(w, http.StatusOK, page)
}
