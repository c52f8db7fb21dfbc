package longterm

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/core"
)

// EndSession ends a session: archives it and records its end time (once;
// ending an ended session only retries what is missing), writes its
// episode when it has at least MinEpisodeUserTurns user messages, and
// extracts facts when conversation.extractOnEnd is on and an LLM exists.
// The episode and the archiving are one transaction: an owner at
// limits.maxEpisodesPerOwner gets a *QuotaError and nothing is written
// (the session stays open, no extraction runs). Errors: ValidationError;
// core.ErrNotFound; *QuotaError; modelapi.ErrUpstream from extraction (the session stays
// ended, the episode is written, the watermark unchanged).
func (s *Store) EndSession(ctx context.Context, req EndSessionRequest) (*EndSessionResult, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(req.Owner, req.SessionID)
	fe.Source(req.Source)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	out, err := s.SettleEpisode(ctx, req.Owner, req.SessionID, true)
	if err != nil {
		return nil, err
	}
	res := &EndSessionResult{Session: out.Session, EndedAt: out.EndedAt, Episode: out.Episode}
	switch {
	case !s.core.Policy.Conversation.ExtractOnEnd:
		res.ExtractionSkipped = "policy"
	case s.core.LLM == nil:
		res.ExtractionSkipped = "no-llm"
	default:
		res.Extraction, err = s.ExtractSession(ctx, SessionExtractRequest(req))
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}
