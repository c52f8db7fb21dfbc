package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// The credential of a request decides what it may do (docs/security.md):
// its role gates routes, its owner binding gates owners, and it caps the
// source a write is recorded with.

type credentialKey struct{}

// withCredential stores the request's credential in ctx and makes it the
// actor history records for the writes of the request.
func withCredential(ctx context.Context, c auth.Credential) context.Context {
	return memory.WithActor(context.WithValue(ctx, credentialKey{}, c), c.ID)
}

// credentialOf returns the request's credential; ok is false outside the
// authenticated API space (never for a route registered with handleAPI).
func credentialOf(ctx context.Context) (auth.Credential, bool) {
	c, ok := ctx.Value(credentialKey{}).(auth.Credential)
	return c, ok
}

// authenticate returns the request with its credential, or the 401 of a
// request without a valid token.
func (s *Server) authenticate(r *http.Request) (*http.Request, *Problem) {
	token := requestToken(r)
	c, err := s.tokens.Authenticate(token)
	if err != nil {
		detail := "send a valid token as Authorization: Bearer <token>"
		if auth.IsSigned(token) { // why a signed token failed helps its minter; a static one is just unknown
			detail += ": " + err.Error()
		}
		return r, newProblem(probUnauth, detail)
	}
	return r.WithContext(withCredential(r.Context(), c)), nil
}

// authorize wraps an API handler: the credential must include role min,
// and when the route names an owner, the credential must be allowed to act
// for it. It fails closed when no credential is present.
func authorize(min auth.Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := credentialOf(r.Context())
		if !ok {
			writeProblem(w, r, newProblem(probUnauth, "send a valid token as Authorization: Bearer <token>"))
			return
		}
		if !c.Role.Includes(min) {
			need := "an admin token"
			if min != auth.RoleAdmin {
				need = "a token of role " + string(min) + " or admin"
			}
			writeProblem(w, r, newProblem(probForbidden, fmt.Sprintf("this route needs %s; this token has role %s", need, c.Role)))
			return
		}
		if owner := r.PathValue("owner"); owner != "" && !c.MayActFor(owner) {
			writeProblem(w, r, ownerNotAllowed())
			return
		}
		h(w, r)
	}
}

func ownerNotAllowed() *Problem {
	return newProblem(probOwnerNotAllowed, "this token is bound to one owner and may not act for another")
}

// maxSource is the highest source a role may assert.
func maxSource(r auth.Role) memory.Source {
	if r.Includes(auth.RoleApp) {
		return memory.SourceUser
	}
	return memory.SourceAgent
}

// writeSource is the source a write of credential c is recorded with, for
// the source the client asked (field names it in problems): absent means
// agent; job is the maintenance jobs' own; a source above the role's
// (memory.Source.Trust: a client may lower the source of its writes, never
// raise it) is 403.
func writeSource(c auth.Credential, asked memory.Source, field string) (memory.Source, *Problem) {
	if asked == "" {
		return memory.SourceAgent, nil
	}
	if asked == memory.SourceJob {
		return "", validationProblem(fieldErr(field, `"job" is reserved for the maintenance jobs; send user, system or agent`))
	}
	rank := asked.Trust()
	if rank == 0 {
		return "", validationProblem(fieldErr(field, strconv.Quote(string(asked))+" must be user, system or agent"))
	}
	if top := maxSource(c.Role); rank > top.Trust() {
		return "", newProblem(probSourceNotAllowed, fmt.Sprintf(
			"%s: a token of role %s may not assert source %q; its writes are recorded as %q at most", field, c.Role, asked, top))
	}
	return asked, nil
}

// errToolCredential is what an MCP tool answers when the request carries no
// credential (cannot happen behind authenticate; fails closed if it does).
var errToolCredential = errors.New("the request carries no credential")

// writeSourceErr is writeSource of a body's "source" field for
// operations, which return errors.
func writeSourceErr(c auth.Credential, asked memory.Source) (memory.Source, error) {
	src, p := writeSource(c, asked, "source")
	if p != nil {
		return "", problemError{p}
	}
	return src, nil
}
