package memory

import (
	"context"
	"errors"
)

// errNotImplemented is returned by the conversation methods until their
// bodies land (first commit of the API only).
var errNotImplemented = errors.New("conversation memory: not implemented yet")

// CreateSession creates a session of req.Owner. An existing id is ErrConflict.
func (s *Store) CreateSession(ctx context.Context, req CreateSessionRequest) (*Session, error) {
	return nil, errNotImplemented
}

// GetSession returns one session with its statistics; another owner's id is ErrNotFound.
func (s *Store) GetSession(ctx context.Context, owner, id string) (*Session, error) {
	return nil, errNotImplemented
}

// ListSessions pages through an owner's sessions, most recently active first.
func (s *Store) ListSessions(ctx context.Context, req ListSessionsRequest) (*SessionPage, error) {
	return nil, errNotImplemented
}

// UpdateSession changes a session's title or archived flag.
func (s *Store) UpdateSession(ctx context.Context, req UpdateSessionRequest) (*Session, error) {
	return nil, errNotImplemented
}

// DeleteSession deletes a session with its messages and summaries.
func (s *Store) DeleteSession(ctx context.Context, owner, id string) error {
	return errNotImplemented
}

// AppendTurn appends one turn (1..N messages) atomically, serialized per
// session, with gap-free seq. Redaction and the injection guard run on every
// message; a refused message is a *ValidationError naming it
// (messages[i].content) and nothing of the turn is stored. Appending to an
// archived session is ErrConflict.
func (s *Store) AppendTurn(ctx context.Context, req AppendRequest) (*AppendResult, error) {
	return nil, errNotImplemented
}

// Messages reads a seq range [From, To) or the last N messages, in seq order.
func (s *Store) Messages(ctx context.Context, req MessagesRequest) ([]ConversationMessage, error) {
	return nil, errNotImplemented
}

// Window builds a context window (see the pure functions in conversation_window.go).
func (s *Store) Window(ctx context.Context, req WindowRequest) (*Window, error) {
	return nil, errNotImplemented
}

// CompactSession summarizes a session's older messages into the summary DAG.
func (s *Store) CompactSession(ctx context.Context, req CompactSessionRequest) (*CompactSessionResult, error) {
	return nil, errNotImplemented
}

// DescribeSummary returns a summary with its children and parent.
func (s *Store) DescribeSummary(ctx context.Context, owner, id string) (*SummaryDescription, error) {
	return nil, errNotImplemented
}

// ExpandSummary returns the original messages a summary covers, byte for
// byte, at most maxTokens of them (0 = no cap); Truncated when cut.
func (s *Store) ExpandSummary(ctx context.Context, owner, id string, maxTokens int) (*Expansion, error) {
	return nil, errNotImplemented
}

// SearchHistory searches an owner's messages and summaries (full text + vector).
func (s *Store) SearchHistory(ctx context.Context, req HistorySearchRequest) ([]HistoryHit, error) {
	return nil, errNotImplemented
}

// CountTokens estimates the tokens of s: one per 4 non-CJK bytes... see conversation_tokens.go.
func CountTokens(s string) int { return (len(s) + 3) / 4 }

// summarizeSessions is the summarize job: compaction of every session over the threshold.
func (s *Store) summarizeSessions(ctx context.Context, opts JobOptions, res *JobResult) error {
	return errNotImplemented
}

// expireSessions is the sessions job: deletion of sessions idle past sessionIdleTTL.
func (s *Store) expireSessions(ctx context.Context, opts JobOptions, res *JobResult) error {
	return errNotImplemented
}
