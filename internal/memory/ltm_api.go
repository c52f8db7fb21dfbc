package memory

import (
	"context"
	"errors"
)

// errNotImplemented marks the engine methods whose bodies follow the API commit.
var errNotImplemented = errors.New("not implemented yet")

// ExtractSession extracts durable facts from the messages of a session
// after its extraction watermark and stores them through the add path
// (validation, redaction, guard, caps, protected categories, history with
// req.Source), with one batch-dedup decision per fact instead of the
// per-fact arbiter. At most 2 LLM calls: one extraction, one batch dedup
// (skipped when no candidate has a near neighbour). No new messages: no LLM
// call, the watermark unchanged. Errors: ValidationError; ErrNotFound (no
// such session of the owner); ErrNoLLM (nothing written, watermark
// unchanged); ErrUpstream (the model failed; nothing written).
func (s *Store) ExtractSession(ctx context.Context, req SessionExtractRequest) (*SessionExtractResult, error) {
	return nil, errNotImplemented
}

// EndSession ends a session: archives it and records its end time (once;
// ending an ended session only retries what is missing), extracts facts when
// conversation.extractOnEnd is on and an LLM exists, and writes its episode
// when it has at least MinEpisodeUserTurns user messages. Errors:
// ValidationError; ErrNotFound; ErrUpstream from extraction (the session
// stays ended, the episode is written, the watermark unchanged).
func (s *Store) EndSession(ctx context.Context, req EndSessionRequest) (*EndSessionResult, error) {
	return nil, errNotImplemented
}

// SearchEpisodes ranks an owner's episodes by hybrid score with recency
// (EpisodeHit), or lists them newest first when the query is empty.
// Errors: ValidationError.
func (s *Store) SearchEpisodes(ctx context.Context, req EpisodeSearchRequest) ([]EpisodeHit, error) {
	return nil, errNotImplemented
}

// GetDocument reads the profile or constraints of (owner, agent), current
// or at req.Version. A never-written document is version 0 with empty
// content. Errors: ValidationError; ErrNotFound (no such past version).
func (s *Store) GetDocument(ctx context.Context, req GetDocumentRequest) (*Document, error) {
	return nil, errNotImplemented
}

// PutDocument writes a new version of a document and records before/after
// in the changelog, in one transaction. Content is redacted and guarded like
// a memory (at most MaxDocumentBytes stored). Errors: ValidationError;
// ErrProtected (constraints with a source other than user); ErrConflict
// (IfVersion does not match).
func (s *Store) PutDocument(ctx context.Context, req PutDocumentRequest) (*Document, error) {
	return nil, errNotImplemented
}

// Changelog lists the writes of an owner's documents, newest first.
// Errors: ValidationError.
func (s *Store) Changelog(ctx context.Context, req ChangelogRequest) ([]ChangelogEntry, error) {
	return nil, errNotImplemented
}

// GetSnapshot returns the document versions a session's context renders.
// Errors: ValidationError; ErrNotFound (no such session).
func (s *Store) GetSnapshot(ctx context.Context, owner, sessionID string) (*SessionSnapshot, error) {
	return nil, errNotImplemented
}

// AdvanceSnapshot moves a session's snapshot to the current versions of its
// agent's profile and constraints. Errors: ValidationError; ErrNotFound.
func (s *Store) AdvanceSnapshot(ctx context.Context, owner, sessionID string) (*SessionSnapshot, error) {
	return nil, errNotImplemented
}

// ListGlobal pages through the tenant-wide memories (categories with
// global: true); req.Owner is ignored. Errors: ValidationError.
func (s *Store) ListGlobal(ctx context.Context, req ListRequest) (*ListPage, error) {
	return nil, errNotImplemented
}

// DeleteGlobal deletes one tenant-wide memory. Errors: ValidationError;
// ErrNotFound; ErrProtected (source other than user or system).
func (s *Store) DeleteGlobal(ctx context.Context, id string, source Source) error {
	return errNotImplemented
}
