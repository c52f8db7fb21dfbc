package server

import (
	"context"
	"net/http"
	"slices"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// A memory the injection guard flagged (mode Flag) is data a model could
// take for orders. It never reaches a model: not in lists and searches, not
// by id, and not inside the result of a write that ended in it (dedup or
// the arbiter may answer with a flagged neighbour). agentFacing decides who
// is a model, for REST and MCP alike; the helpers below apply it.

type mcpRequestKey struct{}

// withMCP marks ctx as an MCP request: a model chooses every tool call,
// whatever the credential.
func withMCP(ctx context.Context) context.Context {
	return context.WithValue(ctx, mcpRequestKey{}, true)
}

// agentFacing reports whether what the request returns is read by a model:
// any MCP request, and REST requests of agent tokens. Without a credential
// it answers true (fails closed).
func agentFacing(ctx context.Context) bool {
	if ctx.Value(mcpRequestKey{}) != nil {
		return true
	}
	c, ok := credentialOf(ctx)
	return !ok || c.Role == auth.RoleAgent
}

// mcpRequests marks every request h serves as an MCP request.
func mcpRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(withMCP(r.Context())))
	})
}

func flagged(flags []string) bool { return slices.Contains(flags, memory.FlagInjection) }

// hiddenFrom reports whether a request may not see m at all (lookups by id
// answer 404 then, exactly like a missing id).
func hiddenFrom(ctx context.Context, m *memory.Memory) bool {
	return agentFacing(ctx) && flagged(m.Flags)
}

// withhold leaves the content of a flagged memory out of what an
// agent-facing request returns; the rest (id, flags, category...) stays,
// so the caller still learns what its write ended in.
func withhold(ctx context.Context, m *memory.Memory) {
	if hiddenFrom(ctx, m) {
		m.Content, m.Withheld = "", true
	}
}

// withholdResults applies withhold to the memories of add results.
func withholdResults(ctx context.Context, rs []memory.AddResult) {
	for i := range rs {
		withhold(ctx, &rs[i].Memory)
	}
}

// withholdHistory leaves out of a memory's history, for an agent-facing
// request, every content the guard would flag: a memory that was flagged
// and then rewritten with clean text is no longer hidden, but its old
// text is still in its history.
func withholdHistory(ctx context.Context, entries []memory.HistoryEntry) {
	if !agentFacing(ctx) {
		return
	}
	for i := range entries {
		e := &entries[i]
		for _, c := range []**string{&e.OldContent, &e.NewContent} {
			if *c != nil && memory.LooksLikeInjection(**c) {
				*c, e.Withheld = nil, true
			}
		}
	}
}

// withholdExtraction applies withhold to an extraction's facts: a flagged
// fact's text and the memory each fact ended in.
func withholdExtraction(ctx context.Context, res *memory.SessionExtractResult) {
	if res == nil {
		return
	}
	for i := range res.Facts {
		f := &res.Facts[i]
		if agentFacing(ctx) && flagged(f.Flags) {
			f.Content, f.Withheld = "", true
		}
		if f.Result != nil {
			withhold(ctx, &f.Result.Memory)
		}
	}
}
