package memory

import (
	"context"
	"errors"
)

// errNotImplemented marks the engine methods whose bodies follow the API commit.
var errNotImplemented = errors.New("not implemented yet")

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

