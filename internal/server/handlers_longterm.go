package server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// Long-term memory from conversations (docs/long-term.md): facts extracted
// from a session's messages, episodes of finished sessions, the versioned
// profile and constraints documents of (owner, agent) with their changelog
// and the per-session snapshots of them. Every route is owner-scoped like
// the memories; a session of another owner answers 404 like a missing one.

// registerLongTermRoutes is the route table of long-term memory. Agents
// extract, end, search episodes, read and write the profile; constraints
// accept only source user (an app or admin token asserting it); the
// tenant-wide (global) memories are listed and deleted by app and admin
// tokens only.
func (s *Server) registerLongTermRoutes(owner string) {
	const sess = "/sessions/{id}"
	s.handleAPI("POST "+owner+sess+"/extract", auth.RoleAgent, s.llmRoute(s.extractSession))
	s.handleAPI("POST "+owner+sess+"/end", auth.RoleAgent, s.llmRoute(s.endSession))
	s.handleAPI("GET "+owner+sess+"/snapshot", auth.RoleAgent, s.getSnapshot)
	s.handleAPI("POST "+owner+sess+"/snapshot/advance", auth.RoleAgent, s.advanceSnapshot)
	s.handleAPI("GET "+owner+"/episodes", auth.RoleAgent, s.searchEpisodes)
	s.handleAPI("GET "+owner+"/profile", auth.RoleAgent, s.getDocument(memory.DocProfile))
	s.handleAPI("PUT "+owner+"/profile", auth.RoleAgent, s.putDocument(memory.DocProfile))
	s.handleAPI("GET "+owner+"/constraints", auth.RoleAgent, s.getDocument(memory.DocConstraints))
	s.handleAPI("PUT "+owner+"/constraints", auth.RoleAgent, s.putDocument(memory.DocConstraints))
	s.handleAPI("GET "+owner+"/changelog", auth.RoleAgent, s.changelog)
	s.handleAPI("GET /v1/global/memories", auth.RoleApp, unbound(s.listGlobal))
	s.handleAPI("DELETE /v1/global/memories/{id}", auth.RoleApp, unbound(s.deleteGlobal))
}

// extractSession: POST /v1/owners/{owner}/sessions/{id}/extract {source?}.
// Extracts facts from the messages after the session's watermark with at
// most two LLM calls; no new messages is a 200 with llmCalls 0. Needs an
// LLM when there are new messages (409 no-llm, nothing written).
func (s *Server) extractSession(w http.ResponseWriter, r *http.Request) {
	id, src, ok := s.sessionWrite(w, r)
	if !ok {
		return
	}
	res, err := s.store.ExtractSession(r.Context(), memory.SessionExtractRequest{
		Owner: r.PathValue("owner"), SessionID: id, Source: src,
	})
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	s.countExtracted(res)
	res.Facts = nonNil(res.Facts)
	withholdExtraction(r.Context(), res)
	writeJSON(w, http.StatusOK, res)
}

// endSession: POST /v1/owners/{owner}/sessions/{id}/end {source?}. Archives
// the session, writes its episode (3 or more user turns) and extracts when
// the policy's conversation.extractOnEnd is on and an LLM exists. Ending an
// ended session again only retries what is missing.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	id, src, ok := s.sessionWrite(w, r)
	if !ok {
		return
	}
	res, err := s.store.EndSession(r.Context(), memory.EndSessionRequest{
		Owner: r.PathValue("owner"), SessionID: id, Source: src,
	})
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	if res.Extraction != nil {
		s.countExtracted(res.Extraction)
		res.Extraction.Facts = nonNil(res.Extraction.Facts)
		withholdExtraction(r.Context(), res.Extraction)
	}
	writeJSON(w, http.StatusOK, res)
}

// sessionWrite reads what extract and end share: no query, the session id,
// an optional body {source} capped by the credential.
func (s *Server) sessionWrite(w http.ResponseWriter, r *http.Request) (string, memory.Source, bool) {
	if !noQuery(w, r) {
		return "", "", false
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return "", "", false
	}
	var b sessionWriteBody
	if p := s.decodeOptionalBody(w, r, &b); p != nil {
		writeProblem(w, r, p)
		return "", "", false
	}
	src, p := writeSource(credential(r), b.Source, "source")
	if p != nil {
		writeProblem(w, r, p)
		return "", "", false
	}
	return id, src, true
}

// countExtracted counts the writes of an extraction like those of an add.
func (s *Server) countExtracted(res *memory.SessionExtractResult) {
	for _, f := range res.Facts {
		if f.Result != nil {
			s.metrics.countActions(*f.Result)
		}
	}
}

// getSnapshot: GET /v1/owners/{owner}/sessions/{id}/snapshot: the profile
// and constraints versions the session's context renders.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	snap, err := s.store.GetSnapshot(r.Context(), r.PathValue("owner"), id)
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

// advanceSnapshot: POST /v1/owners/{owner}/sessions/{id}/snapshot/advance
// (no body, or {}): the session's context renders the current versions
// from now on.
func (s *Server) advanceSnapshot(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	if p := s.decodeOptionalBody(w, r, &emptyBody{}); p != nil {
		writeProblem(w, r, p)
		return
	}
	snap, err := s.store.AdvanceSnapshot(r.Context(), r.PathValue("owner"), id)
	if err != nil {
		s.fail(w, r, inResource(err, resSession))
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

// episodeParams are the query parameters of the episode search.
var episodeParams = []string{"query", "agent", "limit"}

// searchEpisodes: GET /v1/owners/{owner}/episodes?query=&agent=&limit=:
// episodes ranked by hybrid score with recency, or newest first without a query.
func (s *Server) searchEpisodes(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL, episodeParams...)
	req := memory.EpisodeSearchRequest{
		Owner: r.PathValue("owner"), Query: q.str("query"), Agent: q.str("agent"), Limit: q.integer("limit"),
	}
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	hits, err := s.store.SearchEpisodes(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, episodeSearchResponse{Results: nonNil(hits)})
}

// documentParams are the query parameters of a document read.
var documentParams = []string{"agent", "version"}

// getDocument: GET /v1/owners/{owner}/profile|constraints?agent=&version=.
// A document never written is version 0 with empty content; a past
// version that does not exist is 404.
func (s *Server) getDocument(kind memory.DocumentKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := newQuery(r.URL, documentParams...)
		req := memory.GetDocumentRequest{
			Owner: r.PathValue("owner"), Agent: q.str("agent"), Kind: kind, Version: q.integer64("version"),
		}
		if p := q.problem(); p != nil {
			writeProblem(w, r, p)
			return
		}
		d, err := s.store.GetDocument(r.Context(), req)
		if errors.Is(err, memory.ErrNotFound) {
			writeProblem(w, r, noVersion(kind, req.Version))
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	}
}

// noVersion is the 404 of a past version of a document that does not exist.
func noVersion(kind memory.DocumentKind, version int64) *Problem {
	return newProblem(probNotFound, fmt.Sprintf("the %s has no version %d", kind, version))
}

// putDocument: PUT /v1/owners/{owner}/profile|constraints?agent= {content,
// source?, ifVersion?}: a new version, recorded in the changelog.
// Constraints are the user's rules for the agent: only source user (an app
// or admin token asserting it) may write them, anything else is 403.
func (s *Server) putDocument(kind memory.DocumentKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := newQuery(r.URL, "agent")
		agent := q.str("agent")
		if p := q.problem(); p != nil {
			writeProblem(w, r, p)
			return
		}
		var b putDocumentBody
		if p := s.decodeBody(w, r, &b); p != nil {
			writeProblem(w, r, p)
			return
		}
		src, p := writeSource(credential(r), b.Source, "source")
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		d, err := s.store.PutDocument(r.Context(), memory.PutDocumentRequest{
			Owner: r.PathValue("owner"), Agent: agent, Kind: kind, Content: b.Content, Source: src, IfVersion: b.IfVersion,
		})
		if kind == memory.DocConstraints && errors.Is(err, memory.ErrProtected) {
			writeProblem(w, r, newProblem(probProtected, constraintsDetail))
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	}
}

// constraintsDetail is the 403 of a constraints write by another source than user.
const constraintsDetail = `the constraints are the user's rules for the agent: only source "user" may write them (an app or admin token sending "source": "user")`

// changelogParams are the query parameters of the changelog.
var changelogParams = []string{"scope", "agent", "limit"}

// changelog: GET /v1/owners/{owner}/changelog?scope=&agent=&limit=: the
// writes of the owner's documents, newest first. Without agent, every
// agent's; agent= (empty) is the documents shared by all agents.
func (s *Server) changelog(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL, changelogParams...)
	req := memory.ChangelogRequest{
		Owner: r.PathValue("owner"), Scope: memory.DocumentKind(q.str("scope")), Limit: q.integer("limit"),
	}
	if q.values.Has("agent") {
		agent := q.str("agent")
		req.Agent = &agent
	}
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	entries, err := s.store.Changelog(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, changelogResponse{Items: nonNil(entries)})
}

// globalListParams are the query parameters of the global list.
var globalListParams = []string{"category", "limit"}

// listGlobal: GET /v1/global/memories?category=&limit=: the tenant-wide
// memories (categories with global: true), newest first, one page.
func (s *Server) listGlobal(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL, globalListParams...)
	req := memory.ListRequest{Category: q.str("category"), Limit: q.integer("limit")}
	if p := q.problem(); p != nil {
		writeProblem(w, r, p)
		return
	}
	page, err := s.store.ListGlobal(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page.Items = nonNil(page.Items)
	writeJSON(w, http.StatusOK, page)
}

// deleteGlobal: DELETE /v1/global/memories/{id}?source=: a soft delete of
// one tenant-wide memory. Only user or system may delete one; the route is
// for app and admin tokens, so an absent source means system here.
func (s *Server) deleteGlobal(w http.ResponseWriter, r *http.Request) {
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
	if asked == "" {
		asked = memory.SourceSystem
	}
	source, p := writeSource(credential(r), asked, "source")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	if err := s.store.DeleteGlobal(r.Context(), id, source); err != nil {
		s.fail(w, r, inResource(err, resGlobal))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// unbound refuses credentials bound to one owner: tenant-wide memories
// belong to no owner, so a token meant for one end user may not manage them.
func unbound(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if credential(r).Owner != "" {
			writeProblem(w, r, newProblem(probOwnerNotAllowed,
				"this token is bound to one owner; tenant-wide (global) memories need a token that is not bound"))
			return
		}
		h(w, r)
	}
}

// decodeOptionalBody decodes the body into v like decodeBody, except that
// an empty body is the empty object (POSTs whose input is all optional).
func (s *Server) decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) *Problem {
	body, p := s.readBody(w, r)
	if p != nil {
		return p
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeStrict(body, v, "")
}
