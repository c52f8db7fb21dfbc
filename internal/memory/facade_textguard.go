package memory

import "github.com/engram-dev/engram/internal/memory/textguard"

// The text guard and redaction live in internal/memory/textguard; these
// names keep the façade's API (the server and the tests use them).

// FlagInjection marks a memory the injection guard flagged (mode Flag).
// Flagged memories are stored and searchable but never rendered into context.
const FlagInjection = textguard.FlagInjection

// LooksLikeInjection reports whether the injection guard would flag text
// (whatever the policy's mode).
func LooksLikeInjection(text string) bool { return textguard.LooksLikeInjection(text) }

// newRedactor builds the Store's redactor from the policy's settings.
func newRedactor(r Redaction) (*textguard.Redactor, error) {
	return textguard.NewRedactor(r.BuiltinPatterns, r.Patterns)
}
