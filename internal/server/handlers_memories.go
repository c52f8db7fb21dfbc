package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// addMemory: POST /v1/owners/{owner}/memories. 201 when the write created a
// memory (added, or replaced: the arbiter superseded the neighbour with a
// new one), 200 when it ended in an existing one.
func (s *Server) addMemory(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	var b addBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	src, p := writeSource(credential(r), b.Source, "source")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	b.Source = src
	req := b.request(r.PathValue("owner"))
	req.OwnerOnly = credential(r).Owner != ""
	res, err := s.store.Add(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.countActions(*res)
	withhold(r.Context(), &res.Memory)
	status := http.StatusOK
	if res.Action == memory.ActionAdded || res.Action == memory.ActionReplaced {
		status = http.StatusCreated
		// A memory of a global category is stored under no owner of the
		// API (memory.GlobalOwner): the owner's URL would answer 404.
		if res.Memory.Owner != memory.GlobalOwner {
			w.Header().Set("Location", memoryPath(r.PathValue("owner"), res.Memory.ID))
		}
	}
	writeJSON(w, status, res)
}

func memoryPath(owner, id string) string {
	return "/v1/owners/" + url.PathEscape(owner) + "/memories/" + url.PathEscape(id)
}

// addBatch: POST /v1/owners/{owner}/memories/batch. Every item is decoded
// and checked before anything is written; one bad item fails the batch.
func (s *Server) addBatch(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	var b batchBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	if len(b.Items) == 0 || len(b.Items) > maxBatchItems {
		writeProblem(w, r, validationProblem(fieldErr("items", fmt.Sprintf("must hold 1..%d items, got %d", maxBatchItems, len(b.Items)))))
		return
	}
	reqs, p := batchRequests(credential(r), r.PathValue("owner"), b.Items)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	res, err := s.store.AddBatch(r.Context(), reqs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.countActions(res...)
	withholdResults(r.Context(), res)
	writeJSON(w, http.StatusOK, batchResponse{Results: nonNil(res)})
}

// batchRequests decodes the items of a batch and caps their sources. Every
// item is checked: the problem lists every invalid field, unless an item
// asserts a source above the credential's (403: no fix of the input helps).
func batchRequests(c auth.Credential, owner string, items []json.RawMessage) ([]memory.AddRequest, *Problem) {
	reqs := make([]memory.AddRequest, len(items))
	var errs []memory.FieldError
	var denied *Problem
	for i, raw := range items {
		var item addBody
		if p := decodeStrict(raw, &item, fmt.Sprintf("items[%d]", i)); p != nil {
			if len(p.Errors) == 0 { // cannot happen: raw is valid JSON
				p.Errors = []memory.FieldError{fieldErr(fmt.Sprintf("items[%d]", i), p.Detail)}
			}
			errs = append(errs, p.Errors...)
			continue
		}
		src, p := writeSource(c, item.Source, fmt.Sprintf("items[%d].source", i))
		switch {
		case p != nil && p.Status == http.StatusForbidden:
			denied = cmp.Or(denied, p)
		case p != nil:
			errs = append(errs, p.Errors...)
		}
		item.Source = src
		reqs[i] = item.request(owner)
		reqs[i].OwnerOnly = c.Owner != ""
	}
	if denied != nil {
		return nil, denied
	}
	if len(errs) > 0 {
		return nil, validationProblem(errs...)
	}
	return reqs, nil
}

// credential is the request's credential; handlers registered with
// handleAPI always have one (authorize refuses requests without).
func credential(r *http.Request) auth.Credential {
	c, _ := credentialOf(r.Context())
	return c
}

// listIncludes are the values of list's include parameter: memories left
// out by default (expired: past expiresAt, not yet deactivated by the expire
// job; inactive: deleted, expired, forgotten, superseded).
var listIncludes = []string{"expired", "inactive"}

// listParams are the query parameters of list (TestListParamsDocumented
// keeps openapi.yaml in step).
var listParams = []string{"agent", "session", "category", "include", "includeInactive", "limit", "cursor"}

// listMemories: GET /v1/owners/{owner}/memories.
func (s *Server) listMemories(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL, listParams...)
	include := q.set("include", listIncludes...)
	req := memory.ListRequest{
		Owner:           r.PathValue("owner"),
		Agent:           q.str("agent"),
		Session:         q.str("session"),
		Category:        q.str("category"),
		IncludeInactive: q.boolean("includeInactive") || include["inactive"],
		IncludeExpired:  include["expired"],
		Limit:           q.integer("limit"),
		Cursor:          q.str("cursor"),
		ExcludeFlagged:  agentFacing(r.Context()),
	}
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	page, err := s.store.List(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page.Items = nonNil(page.Items)
	writeJSON(w, http.StatusOK, page)
}

// getMemory: GET /v1/owners/{owner}/memories/{id}.
func (s *Server) getMemory(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := idParam(w, r)
	if !ok {
		return
	}
	m, err := s.store.Get(r.Context(), r.PathValue("owner"), id)
	if err == nil && hiddenFrom(r.Context(), m) {
		err = memory.ErrNotFound
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// agentMayNotSee answers 404 and returns true when the caller is
// agent-facing and the memory is flagged (see hiddenFrom); for other
// callers it does nothing.
func (s *Server) agentMayNotSee(w http.ResponseWriter, r *http.Request, id string) bool {
	if !agentFacing(r.Context()) {
		return false
	}
	m, err := s.store.Get(r.Context(), r.PathValue("owner"), id)
	if err == nil && hiddenFrom(r.Context(), m) {
		err = memory.ErrNotFound
	}
	if err != nil {
		s.fail(w, r, err)
		return true
	}
	return false
}

// updateMemory: PATCH /v1/owners/{owner}/memories/{id}.
func (s *Server) updateMemory(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := idParam(w, r)
	if !ok {
		return
	}
	var b updateBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	src, p := writeSource(credential(r), b.Source, "source")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	if s.agentMayNotSee(w, r, id) {
		return
	}
	m, err := s.store.Update(r.Context(), memory.UpdateRequest{
		Owner: r.PathValue("owner"), ID: id, Source: src,
		Content: b.Content, Category: b.Category, Importance: b.Importance, TTL: b.TTL,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withhold(r.Context(), m)
	writeJSON(w, http.StatusOK, m)
}

// deleteMemory: DELETE /v1/owners/{owner}/memories/{id}?source=...; a soft
// delete (the purge job removes the row after retention.purgeInactiveAfter).
func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request) {
	id, ok := idParam(w, r)
	if !ok {
		return
	}
	q := newQuery(r.URL, "source")
	asked := memory.Source(q.str("source"))
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	source, p := writeSource(credential(r), asked, "source")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	if err := s.store.Delete(r.Context(), r.PathValue("owner"), id, source); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// supersede: POST /v1/owners/{owner}/memories/{id}/supersede {"by": id}.
func (s *Server) supersede(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := idParam(w, r)
	if !ok {
		return
	}
	var b supersedeBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	if fe := uuidField("by", b.By); fe != nil {
		writeProblem(w, r, validationProblem(*fe))
		return
	}
	src, p := writeSource(credential(r), b.Source, "source")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	m, err := s.store.Supersede(r.Context(), r.PathValue("owner"), id, b.By, src)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withhold(r.Context(), m)
	writeJSON(w, http.StatusOK, m)
}

// history: GET /v1/owners/{owner}/memories/{id}/history.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := idParam(w, r)
	if !ok {
		return
	}
	if s.agentMayNotSee(w, r, id) {
		return
	}
	entries, err := s.store.History(r.Context(), r.PathValue("owner"), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	withholdHistory(r.Context(), entries)
	writeJSON(w, http.StatusOK, historyResponse{Items: nonNil(entries)})
}

// nonNil turns a nil slice into an empty one, so lists are [] and never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
