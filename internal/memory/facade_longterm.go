package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/longterm"
)

// Documents and episodes are longterm.Store (internal/memory/longterm),
// over the same core state; these names and methods keep the façade's API.
// Each method's rules are documented on the longterm.Store method of the
// same name.

type (
	ChangelogEntry       = longterm.ChangelogEntry
	ChangelogPage        = longterm.ChangelogPage
	ChangelogRequest     = longterm.ChangelogRequest
	Document             = longterm.Document
	DocumentKind         = longterm.DocumentKind
	Episode              = longterm.Episode
	EpisodeHit           = longterm.EpisodeHit
	EpisodeSearchRequest = longterm.EpisodeSearchRequest
	EpisodeSearchResult  = longterm.EpisodeSearchResult
	GetDocumentRequest   = longterm.GetDocumentRequest
	PutDocumentRequest   = longterm.PutDocumentRequest
	SessionSnapshot      = longterm.SessionSnapshot
)

// Document kinds and bounds of long-term memory.
const (
	DocProfile          = longterm.DocProfile
	DocConstraints      = longterm.DocConstraints
	MaxDocumentBytes    = longterm.MaxDocumentBytes
	MinEpisodeUserTurns = longterm.MinEpisodeUserTurns
)

// GetDocument reads the profile or constraints of (owner, agent) (longterm.Store.GetDocument).
func (s *Store) GetDocument(ctx context.Context, req GetDocumentRequest) (*Document, error) {
	return s.lt.GetDocument(ctx, req)
}

// PutDocument replaces a document's content, making a new version (longterm.Store.PutDocument).
func (s *Store) PutDocument(ctx context.Context, req PutDocumentRequest) (*Document, error) {
	return s.lt.PutDocument(ctx, req)
}

// Changelog pages through the changes of an owner's documents (longterm.Store.Changelog).
func (s *Store) Changelog(ctx context.Context, req ChangelogRequest) (*ChangelogPage, error) {
	return s.lt.Changelog(ctx, req)
}

// GetSnapshot returns the document versions a session pins (longterm.Store.GetSnapshot).
func (s *Store) GetSnapshot(ctx context.Context, owner, sessionID string) (*SessionSnapshot, error) {
	return s.lt.GetSnapshot(ctx, owner, sessionID)
}

// AdvanceSnapshot moves a session's snapshot to the current versions (longterm.Store.AdvanceSnapshot).
func (s *Store) AdvanceSnapshot(ctx context.Context, owner, sessionID string) (*SessionSnapshot, error) {
	return s.lt.AdvanceSnapshot(ctx, owner, sessionID)
}

// SearchEpisodes ranks an owner's episodes (longterm.Store.SearchEpisodes).
func (s *Store) SearchEpisodes(ctx context.Context, req EpisodeSearchRequest) (*EpisodeSearchResult, error) {
	return s.lt.SearchEpisodes(ctx, req)
}
