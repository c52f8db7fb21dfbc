package core

// Bounds of texts that more than one idea of the engine checks: the write
// path that makes them, and an import that brings them whole.
const (
	// MaxDocumentBytes bounds a profile or constraints document (after
	// redaction).
	MaxDocumentBytes = 8 << 10
	// MaxSessionTitleBytes bounds a session's title.
	MaxSessionTitleBytes = 500
	// MinSummaryBoundBytes is the least a summary or an episode may hold
	// on import, whatever the policy's limits.maxMessageBytes (a summary
	// of a compaction may be longer than one message).
	MinSummaryBoundBytes = 64 << 10
)
