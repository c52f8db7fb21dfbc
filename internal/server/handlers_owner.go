package server

import (
	"net/http"

	"github.com/engram-dev/engram/internal/memory"
)

// extract: POST /v1/owners/{owner}/extract. Needs an LLM (409 no-llm without).
func (s *Server) extract(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	var b extractBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	src, p := writeSource(credential(r), b.Source, "source")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	res, err := s.store.Extract(r.Context(), memory.ExtractRequest{
		Owner: r.PathValue("owner"), Agent: b.Agent, Session: b.Session, Source: src, Messages: b.Messages,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.countActions(res...)
	withholdResults(r.Context(), res)
	writeJSON(w, http.StatusOK, batchResponse{Results: nonNil(res)})
}

// search: POST /v1/owners/{owner}/search.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	var b searchBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	hits, err := s.store.Search(r.Context(), memory.SearchRequest{
		Owner: r.PathValue("owner"), Agent: b.Agent, Session: b.Session, Query: b.Query,
		Mode: b.Mode, TopK: b.TopK, Categories: b.Categories, MinScore: b.MinScore,
		ExcludeFlagged: agentFacing(r.Context()),
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, searchResponse{Results: nonNil(hits)})
}

// context: POST /v1/owners/{owner}/context.
func (s *Server) context(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	var b contextBody
	if p := s.decodeBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return
	}
	res, err := s.store.Context(r.Context(), memory.ContextRequest{
		Owner: r.PathValue("owner"), Agent: b.Agent, Session: b.Session, Query: b.Query, MaxTokens: b.MaxTokens,
		IncludeEpisodes: b.IncludeEpisodes, MaxEpisodes: b.MaxEpisodes,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res.IDs = nonNil(res.IDs)
	writeJSON(w, http.StatusOK, res)
}

// eraseOwner: DELETE /v1/owners/{owner}, admin tokens only. Hard-deletes
// every memory and all history of the owner (GDPR erasure) and says how
// many rows went.
func (s *Server) eraseOwner(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	res, err := s.store.EraseOwner(r.Context(), r.PathValue("owner"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
