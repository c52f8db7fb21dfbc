package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// Rate limits per credential (docs/api.md#rate-limits): every API request
// takes a token from its credential's bucket (--rate-limit-*), and the
// requests that call the runtime's LLM (extraction, ending a session,
// compaction) take one from a second, smaller bucket too
// (--llm-rate-limit-*). The check runs after authentication and before the
// handler, so a 429 writes nothing, and a request that got its token runs
// to its end: no acknowledged write is ever undone by the limit.

// limits holds the two tables of buckets of a server.
type limits struct {
	requests *buckets
	llm      *buckets
	metrics  *Metrics
	// requestLimit and llmLimit are the settings, for the 429's detail.
	requestLimit, llmLimit RateLimit
}

func newLimits(o Options, m *Metrics) *limits {
	now := o.clock
	if now == nil {
		now = time.Now
	}
	return &limits{
		requests: newBuckets(o.RateLimit, now), llm: newBuckets(o.LLMRateLimit, now),
		metrics: m, requestLimit: o.RateLimit, llmLimit: o.LLMRateLimit,
	}
}

// Label values of engram_rate_limited_total.
const (
	limitClassAPI           = "api" // every API request (/v1, /mcp)
	limitClassLLM           = "llm" // LLM-backed requests, and the arbiter's calls
	limitRejected           = "rejected"
	limitArbitrationSkipped = "arbitration_skipped"
)

// bucketKey identifies a credential: a static token's name (or digest
// prefix) and a signed token's role and subject, in separate spaces so a
// minted subject can never share a static token's bucket. The role is part
// of a signed token's key: an app that mints the user's and the agent's
// tokens with one subject (a natural choice) must not let the agent's
// LLM-heavy requests put the user's bucket into debt (issue 26's fifth
// review, LOW). So is the owner the token is bound to: an app that mints
// {owner: alice, sub: support-bot} and {owner: bob, sub: support-bot} must
// not let one owner's agent spend the other's buckets and in-flight count
// (issue 26's sixth review, L2). An owner id holds no '/', so
// "<owner>/<subject>" cannot be read two ways. Nothing a caller can vary
// per request (the owner in the path, a header) is part of it.
func bucketKey(c auth.Credential) string {
	if c.Expires.IsZero() {
		return "static:" + c.ID
	}
	return "signed:" + string(c.Role) + ":" + c.Owner + "/" + c.ID
}

// admit takes a token of the request's credential for any API request.
func (l *limits) admit(c auth.Credential) *Problem {
	ok, wait := l.requests.take(bucketKey(c))
	if ok {
		return nil
	}
	l.metrics.rateLimited.WithLabelValues(limitClassAPI, limitRejected).Inc()
	return rateLimitedProblem("requests", l.requestLimit, wait)
}

// llmChargeKey keys the llmCharge of an admitted LLM-backed request in its
// context.
type llmChargeKey struct{}

// llmCharge counts the model calls of one admitted LLM-backed request. The
// token taken at admission pays for its first call; each further call (an
// extraction's dedup and episode summaries, a compaction's chunks) takes
// one more from the credential's LLM bucket, into debt if it is empty: the
// request runs to its end (a half-done extraction would write part of its
// facts), and the credential's next LLM-backed requests wait until the
// debt is refilled. The bucket so bounds model calls, not requests.
type llmCharge struct{ calls atomic.Int64 }

// admitLLM takes a token of the LLM bucket for an LLM-backed request and
// returns the context its handler runs with.
func (l *limits) admitLLM(ctx context.Context) (context.Context, *Problem) {
	c, ok := credentialOf(ctx)
	if !ok {
		return ctx, nil // cannot happen behind authenticate; the handler fails closed
	}
	ok, wait := l.llm.take(bucketKey(c))
	if !ok {
		l.metrics.rateLimited.WithLabelValues(limitClassLLM, limitRejected).Inc()
		return ctx, rateLimitedProblem("LLM-backed requests (extract, end, compact)", l.llmLimit, wait)
	}
	return context.WithValue(ctx, llmChargeKey{}, &llmCharge{}), nil
}

// llmRoute wraps the handler of a route that calls the runtime's LLM: it
// takes a token of the LLM bucket first. Without an LLM the route costs
// nothing more (it makes no model call).
func (s *Server) llmRoute(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.hasLLM {
			h(w, r)
			return
		}
		ctx, p := s.limits.admitLLM(r.Context())
		if p != nil {
			writeProblem(w, r, p)
			return
		}
		h(w, r.WithContext(ctx))
	}
}

// mcpLLM is llmRoute for an MCP tool: the refusal is a tool error naming
// the wait.
func (s *Server) mcpLLM(ctx context.Context) (context.Context, error) {
	if !s.hasLLM {
		return ctx, nil
	}
	ctx, p := s.limits.admitLLM(ctx)
	if p != nil {
		return ctx, problemError{p}
	}
	return ctx, nil
}

// rateLimitedProblem is the 429 of an empty bucket; Retry-After is the
// wait until the bucket holds a token again, in whole seconds (at least 1).
func rateLimitedProblem(what string, l RateLimit, wait time.Duration) *Problem {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	p := newProblem(probRateLimited, fmt.Sprintf("this token is over its limit of %d %s a minute (bursts of %d); retry in %d s",
		l.PerMinute, what, l.Burst, secs))
	p.retryAfter = secs
	return p
}

// errLLMRateLimited is what a model call not covered by an LLM-backed
// request (the arbiter of an add) gets when the credential's LLM bucket is
// empty: the arbiter falls back to inserting, as when the LLM fails.
var errLLMRateLimited = errors.New("the LLM rate limit of this token is reached; the model was not asked")

// limitedLLM charges every model call to the credential's LLM bucket: the
// calls of an LLM-backed request beyond its first (llmCharge), and each
// call of a request that is not an LLM-backed route (the arbitration of
// adds), which is refused when the bucket is empty. Calls without a
// credential (none in the service) pass.
type limitedLLM struct {
	next   memory.LLM
	limits *limits
}

func (l *limitedLLM) CompleteJSON(ctx context.Context, system, user string) (string, error) {
	c, ok := credentialOf(ctx)
	if charge, _ := ctx.Value(llmChargeKey{}).(*llmCharge); ok && charge != nil {
		if charge.calls.Add(1) > 1 {
			l.limits.llm.charge(bucketKey(c))
		}
	} else if ok {
		if ok, _ := l.limits.llm.take(bucketKey(c)); !ok {
			l.limits.metrics.rateLimited.WithLabelValues(limitClassLLM, limitArbitrationSkipped).Inc()
			return "", errLLMRateLimited
		}
	}
	return l.next.CompleteJSON(ctx, system, user)
}

// wrapLLM puts the LLM limit in front of the runtime's model (Start wraps
// the instrumented one, so a refused call is no upstream error).
func (l *limits) wrapLLM(next memory.LLM) memory.LLM {
	if l.llm == nil {
		return next
	}
	return &limitedLLM{next: next, limits: l}
}
