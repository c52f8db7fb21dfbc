package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/engram-dev/engram/internal/memory"
)

// UpstreamError marks a failure of the embedding or LLM API. The metric
// decorators wrap every error of those APIs in it, so the service can answer
// 502 (the service works, its upstream does not) instead of 500.
type UpstreamError struct {
	Service string // "embedding" or "llm"
	Err     error
}

func (e *UpstreamError) Error() string { return e.Service + " API: " + e.Err.Error() }
func (e *UpstreamError) Unwrap() error { return e.Err }

// problemError carries a problem decided by the service itself (a
// credential's limits) through code that returns errors (MCP tools).
type problemError struct{ p *Problem }

func (e problemError) Error() string { return e.p.Title + ": " + e.p.Detail }

// problemFor maps an engine error to a problem. internal reports whether it
// is a server fault (logged at error level with the cause).
func problemFor(err error) (p *Problem, internal bool) {
	var pe problemError
	if errors.As(err, &pe) {
		return pe.p, false
	}
	var in resourceError
	if errors.As(err, &in) && errors.Is(err, memory.ErrNotFound) {
		return newProblem(probNotFound, "no "+in.what+" with this id"), false
	}
	if v, ok := memory.IsValidation(err); ok {
		return validationProblem(v.Fields...), false
	}
	var quota *memory.QuotaError
	if errors.As(err, &quota) {
		return quotaProblem(quota), false
	}
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return newProblem(probNotFound, "no memory with this id"), false
	case errors.Is(err, memory.ErrProtected):
		return newProblem(probProtected, protectedDetail(err)), false
	case errors.Is(err, memory.ErrNoLLM):
		return newProblem(probNoLLM, "this runtime has no LLM configured (spec.llm of the MemoryRuntime); extraction needs one"), false
	case errors.Is(err, memory.ErrLocked):
		return newProblem(probLocked, memory.ErrLocked.Error()), false
	case errors.Is(err, memory.ErrConflict):
		return newProblem(probConflict, conflictDetail(err)), false
	case errors.Is(err, context.Canceled):
		// The client went away (or the server is being stopped); nobody
		// reads this answer, and it is nobody's fault.
		return newProblem(probUnavailable, "the request was canceled"), false
	case errors.Is(err, context.DeadlineExceeded):
		return newProblem(probUnavailable, "the request timed out"), true
	}
	var stale *staleDimensionsError
	if errors.As(err, &stale) {
		return newProblem(probUnavailable, fmt.Sprintf(
			"the tenant's vectors have %d dimensions since a re-embed, this pod embeds with %d: retry, the rollout replaces it", stale.tenant, stale.pod)), false
	}
	var up *UpstreamError
	if errors.As(err, &up) {
		return newProblem(probUpstream, "the "+up.Service+" API failed; try again later"), true
	}
	if errors.Is(err, memory.ErrUpstream) {
		return newProblem(probUpstream, "the embedding or LLM API failed; try again later"), true
	}
	if memory.IsUnavailable(err) {
		return newProblem(probUnavailable, "the database cannot be reached; try again later"), true
	}
	return newProblem(probInternal, "an unexpected error occurred; the server log has details"), true
}

// The kinds of things a route looks up by id; a not-found problem names
// the one the route is about.
const (
	resSession = "session"
	resSummary = "summary"
	resGlobal  = "global memory"
)

// resourceError says which kind of thing an engine error is about, so a
// not-found names it ("no session with this id") instead of a memory.
type resourceError struct {
	what string
	err  error
}

func (e resourceError) Error() string { return e.what + ": " + e.err.Error() }
func (e resourceError) Unwrap() error { return e.err }

// inResource marks err as an error of a route about what (nil stays nil).
func inResource(err error, what string) error {
	if err == nil {
		return nil
	}
	return resourceError{what: what, err: err}
}

// protectedDetail says which rule refused a write: a rule of its own
// (memory.RuleError: who may write a global category), else the protected
// category's.
func protectedDetail(err error) string {
	var rule *memory.RuleError
	if errors.As(err, &rule) {
		return rule.Rule
	}
	return memory.ErrProtected.Error()
}

// conflictDetail keeps the engine's explanation ("supersede would create a
// cycle") without repeating the word.
func conflictDetail(err error) string {
	var c *memory.ConflictError
	if errors.As(err, &c) {
		return c.Detail
	}
	return err.Error()
}
