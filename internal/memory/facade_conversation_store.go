package memory

import "context"

// Conversation memory is conversation.Store (internal/memory/conversation),
// over the same core state; these methods keep the façade's API, so the
// service and the tests call the Store as before. Each one's rules are
// documented on the conversation.Store method of the same name.

// CreateSession creates a session of req.Owner (conversation.Store.CreateSession).
func (s *Store) CreateSession(ctx context.Context, req CreateSessionRequest) (*Session, error) {
	return s.conv.CreateSession(ctx, req)
}

// GetSession returns one session with its statistics (conversation.Store.GetSession).
func (s *Store) GetSession(ctx context.Context, owner, id string) (*Session, error) {
	return s.conv.GetSession(ctx, owner, id)
}

// ListSessions pages through an owner's sessions (conversation.Store.ListSessions).
func (s *Store) ListSessions(ctx context.Context, req ListSessionsRequest) (*SessionPage, error) {
	return s.conv.ListSessions(ctx, req)
}

// UpdateSession changes a session's title or archived flag (conversation.Store.UpdateSession).
func (s *Store) UpdateSession(ctx context.Context, req UpdateSessionRequest) (*Session, error) {
	return s.conv.UpdateSession(ctx, req)
}

// DeleteSession deletes a session with its messages and summaries (conversation.Store.DeleteSession).
func (s *Store) DeleteSession(ctx context.Context, owner, id string) error {
	return s.conv.DeleteSession(ctx, owner, id)
}

// AppendTurn appends one turn atomically (conversation.Store.AppendTurn).
func (s *Store) AppendTurn(ctx context.Context, req AppendRequest) (*AppendResult, error) {
	return s.conv.AppendTurn(ctx, req)
}

// Messages reads a seq range or the last N messages (conversation.Store.Messages).
func (s *Store) Messages(ctx context.Context, req MessagesRequest) (*MessagePage, error) {
	return s.conv.Messages(ctx, req)
}

// Window builds a context window of a session (conversation.Store.Window).
func (s *Store) Window(ctx context.Context, req WindowRequest) (*Window, error) {
	return s.conv.Window(ctx, req)
}

// CompactSession summarizes a session's older messages into the summary
// DAG (conversation.Store.CompactSession).
func (s *Store) CompactSession(ctx context.Context, req CompactSessionRequest) (*CompactSessionResult, error) {
	return s.conv.CompactSession(ctx, req)
}

// DescribeSummary returns a summary with its place in the DAG (conversation.Store.DescribeSummary).
func (s *Store) DescribeSummary(ctx context.Context, owner, id string) (*SummaryDescription, error) {
	return s.conv.DescribeSummary(ctx, owner, id)
}

// ExpandSummary returns the original messages a summary covers (conversation.Store.ExpandSummary).
func (s *Store) ExpandSummary(ctx context.Context, req ExpandRequest) (*Expansion, error) {
	return s.conv.ExpandSummary(ctx, req)
}

// SearchHistory searches an owner's messages and summaries (conversation.Store.SearchHistory).
func (s *Store) SearchHistory(ctx context.Context, req HistorySearchRequest) (*HistorySearchResult, error) {
	return s.conv.SearchHistory(ctx, req)
}
