package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/core"
)

// The errors, sources, ids, quotas and field validation every part of the
// engine shares live in internal/memory/core (docs/architecture.md); these
// names keep the façade's API, so the service, the jobs and the tests
// match errors and build requests as before.

// Errors the service maps to HTTP statuses (with errors.Is): core's
// values themselves, so errors.Is holds whichever package returned them.
var (
	ErrNotFound    = core.ErrNotFound
	ErrProtected   = core.ErrProtected
	ErrConflict    = core.ErrConflict
	ErrNoLLM       = core.ErrNoLLM
	ErrUnavailable = core.ErrUnavailable
	ErrLocked      = core.ErrLocked
	ErrBusy        = core.ErrBusy
	ErrLeaseLost   = core.ErrLeaseLost
)

type (
	ConflictError   = core.ConflictError
	RuleError       = core.RuleError
	FieldError      = core.FieldError
	ValidationError = core.ValidationError
	QuotaError      = core.QuotaError
	Source          = core.Source
	PageBounds      = core.PageBounds
)

// Sources of a write.
const (
	SourceUser   = core.SourceUser
	SourceAgent  = core.SourceAgent
	SourceSystem = core.SourceSystem
	SourceJob    = core.SourceJob
)

// Quotas of the policy, named as a MemoryPolicy spells them.
const (
	QuotaSessionsPerOwner   = core.QuotaSessionsPerOwner
	QuotaEpisodesPerOwner   = core.QuotaEpisodesPerOwner
	QuotaDocumentsPerOwner  = core.QuotaDocumentsPerOwner
	QuotaMessagesPerSession = core.QuotaMessagesPerSession
	QuotaTurnMessages       = core.QuotaTurnMessages
	QuotaTurnTokens         = core.QuotaTurnTokens
)

// IsValidation reports whether err is a ValidationError and returns it.
func IsValidation(err error) (*ValidationError, bool) { return core.IsValidation(err) }

// IsUnavailable reports whether err means the database cannot be used
// right now (core.IsUnavailable).
func IsUnavailable(err error) bool { return core.IsUnavailable(err) }

// ValidID reports whether s is a UUID in its canonical form.
func ValidID(s string) bool { return core.ValidID(s) }

// ValidScopeID reports whether s is a valid owner, agent or session id.
func ValidScopeID(s string) bool { return core.ValidScopeID(s) }

// LeastTrusted is the less trusted of a and b (core.LeastTrusted).
func LeastTrusted(a, b Source) Source { return core.LeastTrusted(a, b) }

// WithActor returns ctx carrying the identity recorded as
// memory_history.actor_id by the writes made with it.
func WithActor(ctx context.Context, id string) context.Context { return core.WithActor(ctx, id) }

// CountTokens estimates how many tokens a common LLM tokenizer makes of s:
// the one counter of Engram (core.CountTokens).
func CountTokens(s string) int { return core.CountTokens(s) }
