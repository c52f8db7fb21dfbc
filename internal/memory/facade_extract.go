package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/longterm"
)

// Fact extraction, session extraction and EndSession are longterm.Store's
// (internal/memory/longterm), writing every fact through the write path;
// these names and methods keep the façade's API. Each method's rules are
// documented on the longterm.Store method of the same name.

type (
	Message               = longterm.Message
	ExtractRequest        = longterm.ExtractRequest
	SessionExtractRequest = longterm.SessionExtractRequest
	SessionExtractResult  = longterm.SessionExtractResult
	ExtractedFact         = longterm.ExtractedFact
	EndSessionRequest     = longterm.EndSessionRequest
	EndSessionResult      = longterm.EndSessionResult
)

// Conflict types an extracted fact may carry.
const (
	ConflictFactualCorrection = longterm.ConflictFactualCorrection
	ConflictPreferenceChange  = longterm.ConflictPreferenceChange
	ConflictContextDependent  = longterm.ConflictContextDependent
)

// Batch-dedup decisions about one candidate fact.
const (
	DecisionAdd    = longterm.DecisionAdd
	DecisionUpdate = longterm.DecisionUpdate
	DecisionDelete = longterm.DecisionDelete
	DecisionNoop   = longterm.DecisionNoop
)

// Extract pulls durable facts out of given messages and adds each one (longterm.Store.Extract).
func (s *Store) Extract(ctx context.Context, req ExtractRequest) ([]AddResult, error) {
	return s.lt.Extract(ctx, req)
}

// ExtractSession extracts facts from a session's new messages (longterm.Store.ExtractSession).
func (s *Store) ExtractSession(ctx context.Context, req SessionExtractRequest) (*SessionExtractResult, error) {
	return s.lt.ExtractSession(ctx, req)
}

// EndSession ends a session, writes its episode and extracts its facts (longterm.Store.EndSession).
func (s *Store) EndSession(ctx context.Context, req EndSessionRequest) (*EndSessionResult, error) {
	return s.lt.EndSession(ctx, req)
}
